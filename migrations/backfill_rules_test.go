package migrations_test

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/rstest"
	"github.com/krabka/remotestorage/migrations"
)

// partitionSnapshot is a partition's version and the rows of the data
// tables that belong to it.
type partitionSnapshot struct {
	version int64
	rows    map[string]string // table and key -> the row, as JSON
	stamps  map[string]int64  // table and key -> the row's version stamp
}

// snapshotData reads every partition and its rows (timestamps left out, and
// NULL columns: a column a migration adds, NULL in every row, changes no
// row; a value set to or from NULL still shows).
func snapshotData(ctx context.Context, pool *pgxpool.Pool) (map[string]*partitionSnapshot, error) {
	out := map[string]*partitionSnapshot{}
	rows, err := pool.Query(ctx, "SELECT topic_id::text || '/' || partition, version FROM rlmm_partitions")
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var key string
		var version int64
		if err := rows.Scan(&key, &version); err != nil {
			return nil, err
		}
		out[key] = &partitionSnapshot{version: version, rows: map[string]string{}, stamps: map[string]int64{}}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for table, q := range map[string]string{
		"rlmm_segments":       "SELECT topic_id::text || '/' || partition, segment_id::text, last_version, jsonb_strip_nulls(to_jsonb(x) - 'updated_at' - 'created_at')::text FROM rlmm_segments x",
		"rlmm_segment_epochs": "SELECT topic_id::text || '/' || partition, segment_id::text || '/' || epoch, last_version, jsonb_strip_nulls(to_jsonb(x))::text FROM rlmm_segment_epochs x",
		// No feed carries the purged segments' ends: a cache reads them when
		// it loads, which a vanished_version past its version makes it do.
		"rlmm_epoch_ends": `SELECT x.topic_id::text || '/' || x.partition, x.epoch::text, p.vanished_version, jsonb_strip_nulls(to_jsonb(x))::text
			FROM rlmm_epoch_ends x JOIN rlmm_partitions p ON p.topic_id = x.topic_id AND p.partition = x.partition`,
	} {
		rows, err := pool.Query(ctx, q)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var partition, key, row string
			var stamp int64
			if err := rows.Scan(&partition, &key, &stamp, &row); err != nil {
				return nil, err
			}
			p := out[partition]
			if p == nil {
				return nil, fmt.Errorf("%s row %s of partition %s, which has no row", table, key, partition)
			}
			p.rows[table+" "+key] = row
			p.stamps[table+" "+key] = stamp
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// unbumped lists the partitions whose rows a migration changed without
// moving the partition past its version before, and stamping what changed
// with the new version: changes that a cache caught up to the old version
// would never read.
func unbumped(before, after map[string]*partitionSnapshot) []string {
	var out []string
	for key, a := range after {
		b := before[key]
		if b == nil {
			out = append(out, fmt.Sprintf("partition %s created", key))
			continue
		}
		for _, row := range slices.Sorted(maps.Keys(a.rows)) {
			if b.rows[row] == a.rows[row] {
				continue
			}
			if a.version <= b.version {
				out = append(out, fmt.Sprintf("partition %s: %s changed, the partition's version stayed %d", key, row, b.version))
			} else if a.stamps[row] <= b.version {
				out = append(out, fmt.Sprintf("partition %s: %s changed, stamped %d, not past the version %d a cache may have caught up to", key, row, a.stamps[row], b.version))
			}
		}
		for row := range b.rows {
			if _, ok := a.rows[row]; !ok && a.version <= b.version {
				out = append(out, fmt.Sprintf("partition %s: %s removed, the partition's version stayed %d", key, row, b.version))
			}
		}
	}
	slices.Sort(out)
	return out
}

// backfillFindings applies migration version of fsys to a database at the
// version before it holding the library's rows (three partitions, epochs 0
// to 3, finished and unfinished segments), and reports what breaks the
// backfill rules: a change a cache would not see, and a second run (after a
// Down) that changes anything more.
func backfillFindings(t *testing.T, fsys fs.FS, version int64) []string {
	t.Helper()
	ctx := t.Context()
	pool := rstest.NewPool(t, pgtest.NewEmptyDatabase(t), 0, false)
	require.NoError(t, rstest.MigrateFS(ctx, pool, fsys))
	m, err := rs.NewPgManager(ctx, pool)
	require.NoError(t, err)
	tps := []rs.TopicIDPartition{rstest.TP(0), rstest.TP(1), rstest.TP(2)}
	for i, tp := range tps {
		for j := range int64(3) {
			s := rstest.Segment(tp, j*100, j*100+99, map[rs.LeaderEpoch]int64{rs.LeaderEpoch(j): j * 100, rs.LeaderEpoch(j + 1): j*100 + 50})
			require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, s))
			if j < 2 || i == 0 {
				require.NoError(t, m.UpdateRemoteLogSegmentMetadata(ctx, rstest.Update(s, rs.CopySegmentFinished)))
			}
		}
	}
	m.Close()

	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := migrations.NewProviderFS(db, fsys)
	require.NoError(t, err)
	var previous int64
	for _, s := range p.ListSources() {
		if s.Version < version {
			previous = s.Version
		}
	}
	require.GreaterOrEqual(t, previous, int64(migrations.Baseline), "a migration after the baseline")
	down := func() {
		_, err := p.DownTo(ctx, previous)
		require.NoError(t, err)
	}
	down()
	before, err := snapshotData(ctx, pool)
	require.NoError(t, err)
	require.NoError(t, rstest.MigrateFSTo(ctx, pool, fsys, version))
	after, err := snapshotData(ctx, pool)
	require.NoError(t, err)
	findings := unbumped(before, after)
	down()
	require.NoError(t, rstest.MigrateFSTo(ctx, pool, fsys, version))
	again, err := snapshotData(ctx, pool)
	require.NoError(t, err)
	for key, a := range after {
		if g := again[key]; g == nil || g.version != a.version || !maps.Equal(g.rows, a.rows) {
			findings = append(findings, fmt.Sprintf("partition %s: applied again (after a Down), the migration changed it again", key))
		}
	}
	return findings
}

// Every migration shipped after the baseline, applied to a database holding
// the library's rows, changes a partition's rows only by bumping its
// version past the one before and stamping what it changed with it (so
// caches see the change), and applied again changes nothing more. (The
// baseline itself creates the schema, and its Down drops it: there is no
// schema before it to hold rows.) Test-only migrations show what the check
// catches: a backfill that bumps and stamps passes, one that does not bump
// (and changes the rows again when applied again) and one that bumps but
// does not stamp what it changed are caught.
func TestMigrationBackfillsBumpVersions(t *testing.T) {
	t.Parallel()
	names, err := fs.Glob(migrations.FS(), "*.sql")
	require.NoError(t, err)
	for _, name := range names {
		var v int64
		_, err := fmt.Sscanf(name, "%d_", &v)
		require.NoError(t, err)
		if v < migrations.RulesFrom || v <= migrations.Baseline {
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			require.Empty(t, backfillFindings(t, migrations.FS(), v))
		})
	}
	// A backfill of the size that epoch 0's rows copy, as a later migration
	// might write one: the partitions it changes, bumped, and the rows
	// stamped with the new version (or not, below).
	backfill := func(stamp string) string {
		return fmt.Sprintf(`-- rlmm:compatible-with %d
-- +goose Up
WITH bumped AS (
    UPDATE rlmm_partitions p SET version = p.version + 1, updated_at = now()
    WHERE EXISTS (SELECT FROM rlmm_segment_epochs e
                  WHERE e.topic_id = p.topic_id AND e.partition = p.partition AND e.epoch = 0 AND e.segment_size_bytes < 5000)
    RETURNING p.topic_id, p.partition, p.version
)
UPDATE rlmm_segment_epochs e SET segment_size_bytes = 5000%s
FROM bumped b
WHERE e.topic_id = b.topic_id AND e.partition = b.partition AND e.epoch = 0 AND e.segment_size_bytes < 5000;
-- +goose Down
SELECT 1;
`, rs.SchemaVersion, stamp)
	}
	t.Run("a backfill that bumps and stamps", func(t *testing.T) {
		t.Parallel()
		require.Empty(t, backfillFindings(t, withNext(t, backfill(", last_version = b.version")), rs.SchemaVersion+1))
	})
	t.Run("a backfill that bumps but does not stamp", func(t *testing.T) {
		t.Parallel()
		findings := backfillFindings(t, withNext(t, backfill("")), rs.SchemaVersion+1)
		require.Len(t, findings, 3, "one per partition")
		for _, f := range findings {
			require.Contains(t, f, "/0 changed, stamped")
			require.Contains(t, f, "rlmm_segment_epochs ")
			require.Contains(t, f, "not past the version")
		}
	})
	t.Run("a backfill that does not bump", func(t *testing.T) {
		t.Parallel()
		fsys := withNext(t, fmt.Sprintf(`-- rlmm:compatible-with %d
-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION rlmm_upgrade_test_backfill() RETURNS void LANGUAGE sql AS $$
    UPDATE rlmm_segment_epochs SET segment_size_bytes = segment_size_bytes + 1 WHERE epoch = 1 $$;
-- +goose StatementEnd
SELECT rlmm_upgrade_test_backfill();
-- +goose Down
DROP FUNCTION rlmm_upgrade_test_backfill();
`, rs.SchemaVersion))
		findings := backfillFindings(t, fsys, rs.SchemaVersion+1)
		require.NotEmpty(t, findings)
		require.Contains(t, findings[0], "the partition's version stayed")
		require.Contains(t, findings[len(findings)-1], "applied again (after a Down), the migration changed it again")
	})
}
