package migrations_test

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/rstest"
	"github.com/krabka/remotestorage/migrations"
)

// partitionSnapshot is a partition's delete_version and vanished_xid, and
// the rows of the data tables that belong to it.
type partitionSnapshot struct {
	deleteVersion int64
	vanished      uint64            // vanished_xid, 0: none
	rows          map[string]string // table and key -> the row, as JSON
	stamps        map[string]stamp  // table and key -> the write the change feed shows it by
}

// stamp is the write by which the change feed shows a row: its segment's
// last_version and last_xid (a purged epoch end: the partition's
// vanished_xid).
type stamp struct {
	version int64
	xid     uint64
}

// snapshotData reads every partition and its rows (timestamps left out, and
// NULL columns: a column a migration adds, NULL in every row, changes no
// row; a value set to or from NULL still shows), and a snapshot of the
// database taken after them, as a cache's would be.
func snapshotData(ctx context.Context, pool *pgxpool.Pool) (map[string]*partitionSnapshot, string, error) {
	out := map[string]*partitionSnapshot{}
	rows, err := pool.Query(ctx, "SELECT topic_id::text || '/' || partition, delete_version, coalesce(vanished_xid::text::bigint, 0) FROM rlmm_partitions")
	if err != nil {
		return nil, "", err
	}
	for rows.Next() {
		var key string
		var version, vanished int64
		if err := rows.Scan(&key, &version, &vanished); err != nil {
			return nil, "", err
		}
		out[key] = &partitionSnapshot{deleteVersion: version, vanished: uint64(vanished), rows: map[string]string{}, stamps: map[string]stamp{}}
	}
	if err := rows.Err(); err != nil {
		return nil, "", err
	}
	for table, q := range map[string]string{
		"rlmm_segments": `SELECT topic_id::text || '/' || partition, segment_id::text, last_version, last_xid::text::bigint,
			jsonb_strip_nulls(to_jsonb(x) - 'updated_at' - 'created_at')::text FROM rlmm_segments x`,
		// A cache holds no epoch row: it sees one change by its segment's.
		"rlmm_segment_epochs": `SELECT x.topic_id::text || '/' || x.partition, x.segment_id::text || '/' || x.epoch, s.last_version,
			s.last_xid::text::bigint, jsonb_strip_nulls(to_jsonb(x))::text
			FROM rlmm_segment_epochs x JOIN rlmm_segments s ON s.segment_id = x.segment_id`,
		// No feed carries the purged segments' ends: a cache reads them when
		// it loads, which a vanished_xid its snapshot may not see makes it do.
		"rlmm_epoch_ends": `SELECT x.topic_id::text || '/' || x.partition, x.epoch::text, p.delete_version, coalesce(p.vanished_xid::text::bigint, 0),
			jsonb_strip_nulls(to_jsonb(x))::text
			FROM rlmm_epoch_ends x JOIN rlmm_partitions p ON p.topic_id = x.topic_id AND p.partition = x.partition`,
	} {
		rows, err := pool.Query(ctx, q)
		if err != nil {
			return nil, "", err
		}
		for rows.Next() {
			var partition, key, row string
			var version, xid int64
			if err := rows.Scan(&partition, &key, &version, &xid, &row); err != nil {
				return nil, "", err
			}
			p := out[partition]
			if p == nil {
				return nil, "", fmt.Errorf("%s row %s of partition %s, which has no row", table, key, partition)
			}
			p.rows[table+" "+key] = row
			p.stamps[table+" "+key] = stamp{version: version, xid: uint64(xid)}
		}
		if err := rows.Err(); err != nil {
			return nil, "", err
		}
	}
	var snapshot string
	if err := pool.QueryRow(ctx, "SELECT pg_current_snapshot()::text").Scan(&snapshot); err != nil {
		return nil, "", err
	}
	return out, snapshot, nil
}

// sees reports whether snapshot (pg_snapshot's text) sees the writes of
// the committed transaction xid.
func sees(t *testing.T, snapshot string, xid uint64) bool {
	t.Helper()
	var seen bool
	var xmin, xmax uint64
	var xip string
	n, _ := fmt.Sscanf(strings.ReplaceAll(snapshot, ":", " "), "%d %d %s", &xmin, &xmax, &xip)
	require.GreaterOrEqual(t, n, 2, snapshot)
	switch {
	case xid < xmin:
		seen = true
	case xid >= xmax:
		seen = false
	default:
		seen = !slices.Contains(strings.Split(xip, ","), strconv.FormatUint(xid, 10))
	}
	return seen
}

// unstamped lists the rows a migration changed that a cache brought up to
// a snapshot taken before it would not read again: a changed row whose
// stamp (its segment's last write) that snapshot already sees, or whose
// last_version did not grow, so that the cache keeps its older copy; a
// removed row, or a changed epoch end, with no vanished_xid past it.
func unstamped(t *testing.T, before, after map[string]*partitionSnapshot, snapshot string) []string {
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
			switch st := a.stamps[row]; {
			case strings.HasPrefix(row, "rlmm_epoch_ends "):
				if st.xid == 0 || sees(t, snapshot, st.xid) {
					out = append(out, fmt.Sprintf("partition %s: %s changed, and no vanished_xid makes a cache from before reload", key, row))
				}
			case sees(t, snapshot, st.xid):
				out = append(out, fmt.Sprintf("partition %s: %s changed, stamped by transaction %d, which a cache from before already sees", key, row, st.xid))
			case st.version <= b.stamps[row].version:
				out = append(out, fmt.Sprintf("partition %s: %s changed, its last_version stayed %d", key, row, b.stamps[row].version))
			}
		}
		for row := range b.rows {
			if _, ok := a.rows[row]; !ok && (a.vanished == 0 || sees(t, snapshot, a.vanished)) {
				out = append(out, fmt.Sprintf("partition %s: %s removed, and no vanished_xid makes a cache from before reload", key, row))
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
	before, cacheSnapshot, err := snapshotData(ctx, pool)
	require.NoError(t, err)
	require.NoError(t, rstest.MigrateFSTo(ctx, pool, fsys, version))
	after, _, err := snapshotData(ctx, pool)
	require.NoError(t, err)
	findings := unstamped(t, before, after, cacheSnapshot)
	down()
	require.NoError(t, rstest.MigrateFSTo(ctx, pool, fsys, version))
	again, _, err := snapshotData(ctx, pool)
	require.NoError(t, err)
	for key, a := range after {
		if g := again[key]; g == nil || g.deleteVersion != a.deleteVersion || !maps.Equal(g.rows, a.rows) {
			findings = append(findings, fmt.Sprintf("partition %s: applied again (after a Down), the migration changed it again", key))
		}
	}
	return findings
}

// Every migration shipped after the baseline, applied to a database holding
// the library's rows, changes a segment's rows only by stamping the segment
// with its own transaction and a greater last_version (so caches see the
// change in the feed), and applied again changes nothing more. (The
// baseline itself creates the schema, and its Down drops it: there is no
// schema before it to hold rows.) Test-only migrations show what the check
// catches: a backfill that stamps passes, one that does not stamp (and
// changes the rows again when applied again) and one that stamps the
// segments without a greater last_version are caught.
func TestMigrationBackfillsStampTheFeed(t *testing.T) {
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
	// might write one: the segments it changes, stamped with the
	// migration's transaction and the last_version given (or not, below),
	// and their epoch rows changed.
	backfill := func(lastVersion string) string {
		return fmt.Sprintf(`-- rlmm:compatible-with %d
-- +goose Up
WITH stamped AS (
    UPDATE rlmm_segments s SET last_version = %s, last_xid = pg_current_xact_id(), updated_at = now()
    WHERE EXISTS (SELECT FROM rlmm_segment_epochs e
                  WHERE e.segment_id = s.segment_id AND e.epoch = 0 AND e.segment_size_bytes < 5000)
    RETURNING s.segment_id, s.last_version
)
UPDATE rlmm_segment_epochs e SET segment_size_bytes = 5000, last_version = st.last_version
FROM stamped st
WHERE e.segment_id = st.segment_id AND e.epoch = 0 AND e.segment_size_bytes < 5000;
-- +goose Down
SELECT 1;
`, rs.SchemaVersion, lastVersion)
	}
	t.Run("a backfill that stamps", func(t *testing.T) {
		t.Parallel()
		require.Empty(t, backfillFindings(t, withNext(t, backfill("greatest(s.last_version + 1, nextval('rlmm_versions'))")), rs.SchemaVersion+1))
	})
	t.Run("a backfill that stamps without a greater last_version", func(t *testing.T) {
		t.Parallel()
		findings := backfillFindings(t, withNext(t, backfill("s.last_version")), rs.SchemaVersion+1)
		require.Len(t, findings, 6, "the segment and its epoch row, in each partition")
		for _, f := range findings {
			require.Contains(t, f, " changed, its last_version stayed")
		}
	})
	t.Run("a backfill that does not stamp", func(t *testing.T) {
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
		require.Contains(t, findings[0], "which a cache from before already sees")
		require.Contains(t, findings[len(findings)-1], "applied again (after a Down), the migration changed it again")
	})
}
