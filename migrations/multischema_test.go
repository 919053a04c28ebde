package migrations_test

// Several clusters in one database: one schema per cluster, chosen by the
// connection string's search_path. pgx sends any connection-string key it
// does not know itself as a run-time parameter in the startup message, so
// both "search_path=cluster_a" and libpq's "options=-csearch_path=cluster_a"
// work; only the second also works with psql and other libpq clients.

import (
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/rstest"
	"github.com/krabka/remotestorage/migrations"
)

// withParam returns dsn with one more connection parameter.
func withParam(t *testing.T, dsn, key, value string) string {
	t.Helper()
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		require.NoError(t, err)
		q := u.Query()
		q.Set(key, value)
		// pgx decodes a URL's query as libpq does: percent escapes only,
		// so a space must be %20, not +.
		u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
		return u.String()
	}
	return dsn + " " + key + "='" + strings.ReplaceAll(value, "'", `\'`) + "'"
}

func TestMultipleClustersInOneDatabase(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.NewEmptyDatabase(t)
	admin, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, "CREATE SCHEMA cluster_a; CREATE SCHEMA cluster_b; CREATE SCHEMA cluster_c")
	require.NoError(t, err)

	open := func(dsn string) *pgxpool.Pool {
		pool := rstest.NewPool(t, dsn, 0, false)
		return pool
	}
	// The two spellings pgx honours: its own run-time parameter, and
	// libpq's options, as docs/OPERATIONS.md writes it (-csearch_path%3Dcluster_b).
	poolA := open(withParam(t, dsn, "search_path", "cluster_a"))
	poolB := open(withParam(t, dsn, "options", "-csearch_path=cluster_b"))
	for schema, pool := range map[string]*pgxpool.Pool{"cluster_a": poolA, "cluster_b": poolB} {
		var current string
		require.NoError(t, pool.QueryRow(ctx, "SELECT current_schema()").Scan(&current))
		require.Equal(t, schema, current)
	}

	// Both clusters migrate at once: they serialise on the advisory lock,
	// and each gets its own tables and its own goose version table.
	var g errgroup.Group
	g.Go(func() error { return rs.Migrate(ctx, poolA) })
	g.Go(func() error { return rs.Migrate(ctx, poolB) })
	require.NoError(t, g.Wait())
	require.NoError(t, rs.Migrate(ctx, poolA), "idempotent")

	rows, err := admin.Query(ctx, `
		SELECT table_schema, count(*) FROM information_schema.tables
		WHERE table_name LIKE 'rlmm%' GROUP BY table_schema ORDER BY table_schema`)
	require.NoError(t, err)
	tables := map[string]int{}
	var schema string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&schema, &n}, func() error { tables[schema] = n; return nil })
	require.NoError(t, err)
	require.Len(t, tables, 2, "no table outside the two clusters' schemas: %v", tables)
	require.Equal(t, tables["cluster_a"], tables["cluster_b"])
	for _, s := range []string{"cluster_a", "cluster_b"} {
		var version int64
		require.NoError(t, admin.QueryRow(ctx,
			"SELECT max(version_id) FROM "+pgx.Identifier{s, migrations.VersionTable}.Sanitize()).Scan(&version))
		require.Equal(t, rs.SchemaVersion, version, "goose's version table lands in the cluster's schema")
	}

	// A schema that exists but was never migrated is refused, although its
	// neighbours are migrated.
	_, err = rs.NewPgManager(ctx, open(withParam(t, dsn, "search_path", "cluster_c")))
	require.ErrorContains(t, err, "no remotestorage schema")

	a, err := rs.NewPgManager(ctx, poolA)
	require.NoError(t, err)
	defer a.Close()
	b, err := rs.NewPgManager(ctx, poolB)
	require.NoError(t, err)
	defer b.Close()

	// The same partition, even the same segment id, in both clusters: ids
	// are unique per cluster.
	tp := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "orders", Partition: 0}
	id := rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.New()}
	for i, m := range []*rs.PgManager{a, b} {
		require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadata{
			SegmentID: id, StartOffset: 0, EndOffset: 99, SegmentSizeInBytes: int32(1000 * (i + 1)),
			State: rs.CopySegmentStarted, SegmentLeaderEpochs: map[rs.LeaderEpoch]int64{0: 0, 1: 60}, // with epoch rows
		}))
	}
	require.NoError(t, a.UpdateRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadataUpdate{SegmentID: id, State: rs.CopySegmentFinished}))

	got, found, err := a.RemoteLogSegmentMetadata(ctx, tp, 0, 50)
	require.NoError(t, err)
	require.True(t, found)
	require.EqualValues(t, 1000, got.SegmentSizeInBytes, "cluster a's own segment")
	_, found, err = b.RemoteLogSegmentMetadata(ctx, tp, 0, 50)
	require.NoError(t, err)
	require.False(t, found, "b's copy of the segment has not finished")
	listB, err := b.ListRemoteLogSegments(ctx, tp)
	require.NoError(t, err)
	require.Len(t, listB, 1)
	require.Equal(t, rs.CopySegmentStarted, listB[0].State)
	require.EqualValues(t, 2000, listB[0].SegmentSizeInBytes)

	// A partition delete in b leaves a alone.
	for _, st := range []rs.RemotePartitionDeleteState{rs.DeletePartitionMarked, rs.DeletePartitionStarted, rs.DeletePartitionFinished} {
		require.NoError(t, b.PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{TopicIDPartition: tp, State: st}))
	}
	listB, err = b.ListRemoteLogSegments(ctx, tp)
	require.NoError(t, err)
	require.Empty(t, listB)
	listA, err := a.ListRemoteLogSegments(ctx, tp)
	require.NoError(t, err)
	require.Len(t, listA, 1)

	// The guards and the repair functions work per schema too, even for a
	// DBA whose search_path is elsewhere and who names them with their
	// schema.
	_, err = admin.Exec(ctx, "UPDATE cluster_a.rlmm_segments SET state = 2 WHERE segment_id = $1", id.ID)
	require.ErrorContains(t, err, "call rlmm_set_segment_state")
	_, err = admin.Exec(ctx, "SELECT cluster_a.rlmm_set_segment_state($1, 'delete_started')", id.ID)
	require.NoError(t, err)
	var epochState int16
	require.NoError(t, admin.QueryRow(ctx, "SELECT state FROM cluster_a.rlmm_segment_epochs WHERE segment_id = $1", id.ID).Scan(&epochState))
	require.EqualValues(t, rs.DeleteSegmentStarted, epochState)
	_, err = admin.Exec(ctx, "SELECT cluster_a.rlmm_set_segment_state($1, 'copy_finished')", id.ID)
	require.ErrorContains(t, err, "DELETE_SEGMENT_STARTED -> COPY_SEGMENT_FINISHED is not an allowed transition")
	listA, err = a.ListRemoteLogSegments(ctx, tp)
	require.NoError(t, err)
	require.Equal(t, rs.DeleteSegmentStarted, listA[0].State)
}

// TestMigrateIntoMissingSchema: a search_path naming a schema that does not
// exist fails the migration, and leaves nothing behind.
func TestMigrateIntoMissingSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.NewEmptyDatabase(t)
	pool, err := pgxpool.New(ctx, withParam(t, dsn, "search_path", "nosuch"))
	require.NoError(t, err)
	defer pool.Close()
	err = rs.Migrate(ctx, pool)
	require.ErrorContains(t, err, "no schema has been selected to create in")
	var tables int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'rlmm%'").Scan(&tables))
	require.Zero(t, tables)
}
