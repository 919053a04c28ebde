package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
)

// TestRolesSQL applies the printed roles script to a fresh database, then
// migrates as a member of the owner role, runs a PgManager as a member of
// the application role (whose privileges are exactly what the library
// needs: no DELETE, purging included), repairs as a member of the DBA
// role, and checks what each role may not do.
func TestRolesSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Roles are cluster-wide: a prefix of this run's own.
	var random [4]byte
	_, _ = rand.Read(random[:])
	prefix := "t" + hex.EncodeToString(random[:]) + "_"
	r := runInProcess("roles", "sql", "--prefix", prefix)
	require.Equal(t, 0, r.code, r.output())
	script := r.stdout

	dsn := pgtest.NewEmptyDatabase(t)
	admin, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer admin.Close(ctx)
	logins := map[string]string{"migrator": prefix + "owner", "broker": prefix + "app", "dashboard": prefix + "readonly", "person": prefix + "dba"}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, dsn)
		require.NoError(t, err)
		defer conn.Close(ctx)
		for login := range logins {
			_, err := conn.Exec(ctx, "DROP OWNED BY "+prefix+login+"; DROP ROLE IF EXISTS "+prefix+login)
			require.NoError(t, err)
		}
		for _, group := range []string{"dba", "owner", "app", "readonly"} {
			_, err := conn.Exec(ctx, "DROP OWNED BY "+prefix+group+"; DROP ROLE IF EXISTS "+prefix+group)
			require.NoError(t, err)
		}
	})
	_, err = admin.Exec(ctx, script)
	require.NoError(t, err)
	_, err = admin.Exec(ctx, script) // idempotent
	require.NoError(t, err)
	for login, group := range logins {
		_, err := admin.Exec(ctx, "CREATE ROLE "+prefix+login+" LOGIN IN ROLE "+group)
		require.NoError(t, err)
	}
	_, err = admin.Exec(ctx, "ALTER ROLE "+prefix+"migrator SET role = '"+prefix+"owner'")
	require.NoError(t, err)

	as := func(login string) *pgxpool.Pool {
		cfg, err := pgxpool.ParseConfig(dsn)
		require.NoError(t, err)
		cfg.ConnConfig.User = prefix + login
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		return pool
	}
	migrator, broker, dashboard, person := as("migrator"), as("broker"), as("dashboard"), as("person")

	require.NoError(t, remotestorage.Migrate(ctx, migrator))
	_, err = admin.Exec(ctx, script) // after migrating, as the help says
	require.NoError(t, err)
	var owners []string
	rows, err := admin.Query(ctx, `SELECT DISTINCT pg_get_userbyid(c.relowner) FROM pg_class c
		WHERE c.relkind IN ('r', 'v') AND c.relname LIKE 'rlmm\_%' AND c.relnamespace = 'public'::regnamespace
		UNION SELECT DISTINCT pg_get_userbyid(p.proowner) FROM pg_proc p WHERE p.proname LIKE 'rlmm\_%'`)
	require.NoError(t, err)
	owners, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{prefix + "owner"}, owners)

	// A broker calls Migrate at start, as the README shows: on the schema
	// the owner migrated, it only reads. (A minute: what it did before was
	// retry goose's lock, which the role may not take, for five.)
	started, cancel := context.WithTimeout(ctx, time.Minute)
	require.NoError(t, remotestorage.Migrate(started, broker), "Migrate as the application role on an up-to-date schema")
	cancel()
	// Brokers use one sequence, the write order's.
	var seqs []string
	rows, err = admin.Query(ctx, `SELECT c.relname FROM pg_class c WHERE c.relkind = 'S' AND c.relnamespace = 'public'::regnamespace
		AND CASE WHEN c.relkind = 'S' THEN has_sequence_privilege($1, c.oid, 'USAGE, SELECT, UPDATE') END`, prefix+"app")
	require.NoError(t, err)
	seqs, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"rlmm_versions"}, seqs, "sequences the application role may use")

	// OPERATIONS.md's grants give a broker what the script gives the
	// application role, table by table, and a broker starts with them.
	readmeRole := prefix + "readme"
	_, err = admin.Exec(ctx, "CREATE ROLE "+readmeRole+" LOGIN")
	require.NoError(t, err)
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, dsn)
		require.NoError(t, err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "DROP OWNED BY "+readmeRole+"; DROP ROLE IF EXISTS "+readmeRole)
		require.NoError(t, err)
	})
	_, err = admin.Exec(ctx, strings.NewReplacer("cluster_a", "public", "rlmm_app", readmeRole).Replace(readmeBrokerGrants(t)))
	require.NoError(t, err)
	// byName runs query, whose rows are a name and privileges, for role.
	byName := func(query, role string) map[string][]string {
		rows, err := admin.Query(ctx, query, role)
		require.NoError(t, err)
		out := map[string][]string{}
		for rows.Next() {
			var name string
			var privs []string
			require.NoError(t, rows.Scan(&name, &privs))
			out[name] = privs
		}
		require.NoError(t, rows.Err())
		return out
	}
	privileges := func(role string) map[string][]string {
		return byName(`SELECT c.relname, array(SELECT p FROM unnest('{SELECT,INSERT,UPDATE,DELETE,TRUNCATE,REFERENCES,TRIGGER}'::text[]) p
			WHERE has_table_privilege($1, c.oid, p) ORDER BY p)
			FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'v') AND c.relname LIKE 'rlmm\_%'`, role)
	}
	// Exactly what the library needs: it reads every table and view, and
	// inserts into and updates the three tables it writes; it deletes
	// nothing itself and writes no epoch end (purging goes through
	// rlmm_purge_round, run as the owner, which keeps them) and writes
	// neither the data's generation nor the version table.
	appPrivileges := privileges(prefix + "app")
	dataTables := []string{"rlmm_partitions", "rlmm_segments", "rlmm_segment_epochs"}
	for _, table := range append(dataTables, "rlmm_epoch_ends", "rlmm_data_generation", "rlmm_segments_v", "rlmm_goose_db_version") {
		require.Contains(t, appPrivileges, table)
	}
	for name, privs := range appPrivileges {
		want := []string{"SELECT"}
		if slices.Contains(dataTables, name) {
			want = []string{"INSERT", "SELECT", "UPDATE"}
		}
		require.Equal(t, want, privs, "the application role's privileges on %s", name)
	}
	require.Equal(t, appPrivileges, privileges(readmeRole), "OPERATIONS.md's grants and rlmmctl roles sql's application role, on tables and views")
	// The same on the sequences and functions: the write order's sequence
	// and the purge's round, beyond what every role may.
	routinePrivileges := func(role string) map[string][]string {
		return byName(`SELECT 'sequence ' || c.relname, array(SELECT p FROM unnest('{SELECT,UPDATE,USAGE}'::text[]) p
			WHERE has_sequence_privilege($1, c.oid, p) ORDER BY p)
			FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'S' AND c.relname LIKE 'rlmm\_%'
			UNION ALL
			SELECT 'function ' || p.oid::regprocedure::text, CASE WHEN has_function_privilege($1, p.oid, 'EXECUTE') THEN '{EXECUTE}'::text[] ELSE '{}' END
			FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace AND p.proname LIKE 'rlmm\_%'`, role)
	}
	appRoutines := routinePrivileges(prefix + "app")
	require.Equal(t, []string{"USAGE"}, appRoutines["sequence rlmm_versions"])
	require.Equal(t, []string{"EXECUTE"}, appRoutines["function rlmm_purge_round(interval,integer)"])
	require.Equal(t, appRoutines, routinePrivileges(readmeRole), "OPERATIONS.md's grants and rlmmctl roles sql's application role, on sequences and functions")
	readme := as("readme")
	started, cancel = context.WithTimeout(ctx, time.Minute)
	require.NoError(t, remotestorage.Migrate(started, readme), "Migrate with OPERATIONS.md's grants")
	cancel()
	readmeManager, err := remotestorage.NewPgManager(ctx, readme)
	require.NoError(t, err)
	readmeManager.Close()

	// The broker works, purging included.
	m, err := remotestorage.NewPgManager(ctx, broker)
	require.NoError(t, err)
	forgotten := remotestorage.RemoteLogSegmentMetadata{
		SegmentID: remotestorage.RemoteLogSegmentID{TopicIDPartition: remotestorage.TopicIDPartition{TopicID: uuid.New(), Topic: "audit", Partition: 0}, ID: uuid.New()},
		EndOffset: 9, State: remotestorage.CopySegmentStarted, SegmentLeaderEpochs: map[remotestorage.LeaderEpoch]int64{0: 0},
	}
	require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, forgotten))
	for _, st := range []remotestorage.RemoteLogSegmentState{remotestorage.CopySegmentFinished, remotestorage.DeleteSegmentStarted, remotestorage.DeleteSegmentFinished} {
		require.NoError(t, m.UpdateRemoteLogSegmentMetadata(ctx, remotestorage.RemoteLogSegmentMetadataUpdate{SegmentID: forgotten.SegmentID, State: st}))
	}
	// And a partition whose delete finished, with a finished segment: its
	// purge deletes the segment and its epoch rows, and takes its delete
	// record.
	deleted := remotestorage.TopicIDPartition{TopicID: uuid.New(), Topic: "deleted", Partition: 0}
	deletedSeg := remotestorage.RemoteLogSegmentID{TopicIDPartition: deleted, ID: uuid.New()}
	require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, remotestorage.RemoteLogSegmentMetadata{
		SegmentID: deletedSeg, EndOffset: 9, State: remotestorage.CopySegmentStarted, SegmentLeaderEpochs: map[remotestorage.LeaderEpoch]int64{0: 0},
	}))
	require.NoError(t, m.UpdateRemoteLogSegmentMetadata(ctx, remotestorage.RemoteLogSegmentMetadataUpdate{SegmentID: deletedSeg, State: remotestorage.CopySegmentFinished}))
	for _, st := range []remotestorage.RemotePartitionDeleteState{remotestorage.DeletePartitionMarked, remotestorage.DeletePartitionStarted, remotestorage.DeletePartitionFinished} {
		require.NoError(t, m.PutRemotePartitionDeleteMetadata(ctx, remotestorage.RemotePartitionDeleteMetadata{TopicIDPartition: deleted, State: st}))
	}
	rowsOf := func(sql string, args ...any) int {
		t.Helper()
		var n int
		require.NoError(t, admin.QueryRow(ctx, sql, args...).Scan(&n))
		return n
	}
	require.Zero(t, rowsOf("SELECT count(*) FROM rlmm_epoch_ends"), "a write raised an epoch end")
	purged, err := m.PurgeForgotten(ctx, 0)
	require.NoError(t, err, "PurgeForgotten as the application role")
	require.Equal(t, int64(2), purged)
	require.Zero(t, rowsOf("SELECT count(*) FROM rlmm_segments WHERE segment_id = ANY($1)", []uuid.UUID{forgotten.SegmentID.ID, deletedSeg.ID}))
	require.Zero(t, rowsOf("SELECT count(*) FROM rlmm_segment_epochs WHERE segment_id = ANY($1)", []uuid.UUID{forgotten.SegmentID.ID, deletedSeg.ID}))
	require.Zero(t, rowsOf("SELECT count(*) FROM rlmm_epoch_ends WHERE topic_id = $1", deleted.TopicID))
	require.Equal(t, 1, rowsOf("SELECT count(*) FROM rlmm_epoch_ends WHERE topic_id = $1 AND end_offset = 9", forgotten.SegmentID.TopicIDPartition.TopicID),
		"the purge of a finished segment keeps its epoch's end")
	require.Equal(t, 1, rowsOf("SELECT count(*) FROM rlmm_partitions WHERE topic_id = $1 AND delete_state IS NULL", deleted.TopicID),
		"the purge took the deleted partition's delete record")
	tp := remotestorage.TopicIDPartition{TopicID: uuid.New(), Topic: "orders", Partition: 0}
	seg := remotestorage.RemoteLogSegmentMetadata{
		SegmentID: remotestorage.RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.New()}, EndOffset: 9,
		State: remotestorage.CopySegmentStarted, SegmentLeaderEpochs: map[remotestorage.LeaderEpoch]int64{0: 0},
	}
	require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, seg))
	require.NoError(t, m.UpdateRemoteLogSegmentMetadata(ctx, remotestorage.RemoteLogSegmentMetadataUpdate{SegmentID: seg.SegmentID, State: remotestorage.CopySegmentFinished}))
	_, found, err := m.RemoteLogSegmentMetadata(ctx, tp, 0, 5)
	require.NoError(t, err)
	require.True(t, found)
	require.NoError(t, m.PutRemotePartitionDeleteMetadata(ctx, remotestorage.RemotePartitionDeleteMetadata{TopicIDPartition: tp, State: remotestorage.DeletePartitionMarked}))

	denied := func(pool *pgxpool.Pool, sql string) {
		t.Helper()
		_, err := pool.Exec(ctx, sql)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, sql)
		require.Equal(t, pgerrcode.InsufficientPrivilege, pgErr.Code, "%s: %v", sql, err)
	}
	for _, sql := range []string{
		"ALTER TABLE rlmm_segments ADD COLUMN x integer",
		"ALTER TABLE rlmm_partitions DROP CONSTRAINT rlmm_partitions_pkey",
		"DROP TABLE rlmm_segment_epochs",
		"TRUNCATE rlmm_segments CASCADE",
		"DELETE FROM rlmm_partitions",
		"DELETE FROM rlmm_segments",
		"DELETE FROM rlmm_segment_epochs",
		"DELETE FROM rlmm_epoch_ends",
		"UPDATE rlmm_data_generation SET generation = generation + 1",
		"INSERT INTO rlmm_data_generation (id, generation) VALUES (1, 1) ON CONFLICT (id) DO NOTHING",
		"INSERT INTO rlmm_goose_db_version (version_id, is_applied) VALUES (999, true)",
		"UPDATE rlmm_goose_db_version SET is_applied = false",
		"INSERT INTO rlmm_segment_transitions SELECT * FROM rlmm_segment_transitions",
		"DELETE FROM rlmm_partition_delete_transitions",
		"CREATE TABLE rlmm_evil (x integer)",
		"CREATE INDEX ON rlmm_segments (broker_id)",
	} {
		denied(broker, sql)
	}

	// The dashboard reads, and nothing else.
	var n int
	require.NoError(t, dashboard.QueryRow(ctx, "SELECT count(*) FROM rlmm_segments").Scan(&n))
	require.Equal(t, 1, n)
	require.NoError(t, dashboard.QueryRow(ctx, "SELECT count(*) FROM rlmm_segments_v").Scan(&n))
	require.Equal(t, 1, n)
	ro, err := remotestorage.NewPgManager(ctx, dashboard)
	require.NoError(t, err)
	list, err := ro.ListRemoteLogSegments(ctx, tp)
	require.NoError(t, err)
	require.Len(t, list, 1)
	err = ro.AddRemoteLogSegmentMetadata(ctx, remotestorage.RemoteLogSegmentMetadata{
		SegmentID: remotestorage.RemoteLogSegmentID{TopicIDPartition: remotestorage.TopicIDPartition{TopicID: uuid.New(), Topic: "x"}, ID: uuid.New()},
		EndOffset: 9, State: remotestorage.CopySegmentStarted, SegmentLeaderEpochs: map[remotestorage.LeaderEpoch]int64{0: 0},
	})
	require.ErrorIs(t, err, remotestorage.ErrIO)
	require.False(t, remotestorage.OutcomeUnknown(err), "a refused privilege applies nothing")
	for _, sql := range []string{"UPDATE rlmm_segments SET broker_id = 1", "DELETE FROM rlmm_partitions", "TRUNCATE rlmm_segments CASCADE", "DROP TABLE rlmm_segments"} {
		denied(dashboard, sql)
	}

	// A person reads, and repairs through the functions only.
	require.NoError(t, person.QueryRow(ctx, "SELECT count(*) FROM rlmm_segments_v").Scan(&n))
	require.Equal(t, 1, n)
	var version int64
	require.NoError(t, person.QueryRow(ctx, "SELECT rlmm_set_segment_state($1, 'delete_started')", seg.SegmentID.ID).Scan(&version))
	got, err := m.ListRemoteLogSegments(ctx, tp)
	require.NoError(t, err)
	require.Equal(t, remotestorage.DeleteSegmentStarted, got[0].State, "the person's repair")
	require.NoError(t, person.QueryRow(ctx, "SELECT rlmm_set_partition_delete_state($1, 0, 'delete_started')", tp.TopicID).Scan(&version))
	require.NoError(t, person.QueryRow(ctx, "SELECT rlmm_resync()").Scan(&version))
	require.NoError(t, person.QueryRow(ctx, "SELECT rlmm_purge('0')").Scan(&version))
	for _, sql := range []string{
		"UPDATE rlmm_segments SET state = 3",
		"INSERT INTO rlmm_data_generation (id, generation) VALUES (1, 1)",
		"DELETE FROM rlmm_segments",
		"TRUNCATE rlmm_segments CASCADE",
		"UPDATE rlmm_partitions SET delete_state = 2",
	} {
		denied(person, sql)
	}
	for _, pool := range []*pgxpool.Pool{broker, dashboard} {
		for _, sql := range []string{
			"SELECT rlmm_set_segment_state('" + seg.SegmentID.ID.String() + "', 'delete_finished')",
			"SELECT rlmm_set_partition_delete_state('" + tp.TopicID.String() + "', 0, 'delete_finished')",
			"SELECT rlmm_resync()",
		} {
			denied(pool, sql)
		}
	}
	denied(dashboard, "SELECT * FROM rlmm_purge_round('0', 10)")
	denied(broker, "SELECT rlmm_purge('0')")
}

// readmeBrokerGrants is the SQL block of docs/OPERATIONS.md's "Database roles".
func readmeBrokerGrants(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "OPERATIONS.md"))
	require.NoError(t, err)
	readme := string(b)
	at := strings.Index(readme, "**Database roles**")
	require.GreaterOrEqual(t, at, 0, "OPERATIONS.md's Database roles")
	block := regexp.MustCompile("(?s)```sql\n(.*?)```").FindStringSubmatch(readme[at:])
	require.NotNil(t, block, "OPERATIONS.md's grants")
	return block[1]
}

func TestRolesSQLRejectsBadNames(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--prefix", "x; DROP"}, {"--prefix", "Upper_"}, {"--schema", "a.b"}, {"--schema", ""}} {
		r := runInProcess(append([]string{"roles", "sql"}, args...)...)
		require.Equal(t, exitUsage, r.code, "%v: %s", args, r.output())
		require.Empty(t, r.stdout)
	}
}
