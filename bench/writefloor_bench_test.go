package bench_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/dbuuid"
	"github.com/krabka/remotestorage/internal/rstest"
)

// BenchmarkWriteFloor asks what bounds an add and its COPY_SEGMENT_FINISHED
// (the write target: 0.7 of two raw single-row UPDATE commits). The
// library's write runs next to the same write with parts of the schema taken
// away, each on a database of its own, every client on its own partition:
//
//   - library: AddRemoteLogSegmentMetadata then UpdateRemoteLogSegmentMetadata;
//   - library without row rules: the same, after dropping the data tables'
//     CHECK constraints (dropChecks);
//   - bare segments table: one INSERT and one UPDATE of the same columns
//     (state, versions, last_xid, updated_at: not HOT) in a table made LIKE
//     rlmm_segments with its indexes and nothing else: no partition row, no
//     epoch rows, no rules, no keys, no triggers;
//   - two raw UPDATE commits: the baseline, two HOT updates of one indexed row.
//
// The bare table is the floor of any layout that keeps rlmm_segments' indexes
// (by id, list order, change feed, in-flight); docs/BENCHMARKS.md compares it.
//
//	go test -run '^$' -bench '^BenchmarkWriteFloor$' -benchtime 3s ./bench
func BenchmarkWriteFloor(b *testing.B) {
	for _, clients := range []int{1, 8, 32} {
		library := writeFloorDatabase(b, "")
		noRules := writeFloorDatabase(b, dropChecks)
		bare := writeFloorDatabase(b, bareSegments+`
CREATE TABLE bench_raw (id integer PRIMARY KEY, event_timestamp_ms bigint NOT NULL, pad text NOT NULL);
INSERT INTO bench_raw SELECT g, 0, repeat('x', 150) FROM generate_series(0, 1999) g;
ANALYZE bench_raw;`)

		for _, v := range []struct {
			name string
			dsn  string
			op   writeFloorOp
		}{
			{"library", library, libraryAddFinish},
			{"library without row rules", noRules, libraryAddFinish},
			{"bare segments table", bare, bareAddFinish},
			{"two raw UPDATE commits", bare, rawTwoCommits},
		} {
			b.Run(fmt.Sprintf("%s/clients=%d", v.name, clients), func(b *testing.B) { runWriteVariant(b, v.dsn, clients, v.op) })
		}
	}
}

// bareSegments creates bare_segments: a table LIKE rlmm_segments with its
// indexes and the base types of the columns that have a domain there, so
// that it checks nothing.
const bareSegments = `
CREATE TABLE bare_segments (LIKE rlmm_segments INCLUDING DEFAULTS INCLUDING INDEXES);
ALTER TABLE bare_segments ALTER COLUMN start_offset TYPE bigint, ALTER COLUMN segment_size_bytes TYPE integer,
    ALTER COLUMN state TYPE smallint;`

// bareAddFinish writes the same row with the same two statements' effect on
// the segment row alone: an INSERT, then an UPDATE of state, broker,
// versions, last_xid and updated_at by the id.
func bareAddFinish(ctx context.Context, w *writeFloor, _ *rand.Rand) error {
	i := w.next.Add(1)
	id := dbuuid.UUID(uuid.New())
	_, err := w.pool.Exec(ctx, `INSERT INTO bare_segments (topic_id, partition, segment_id, topic, start_offset, end_offset,
    max_timestamp_ms, broker_id, event_timestamp_ms, segment_size_bytes, custom_metadata, state, txn_index_empty,
    epochs, epoch_start_offsets, added_version, last_version, last_xid)
VALUES ($1, $2, $3, 'floor', $4, $5, 0, 0, 0, 1024, NULL, 0, true, ARRAY[0], ARRAY[$4::bigint], $6, $6, pg_current_xact_id())`,
		dbuuid.UUID(w.topic), int32(i%int64(w.clients)), id, i*100, i*100+99, 2*i)
	if err != nil {
		return err
	}
	_, err = w.pool.Exec(ctx, `UPDATE bare_segments SET state = 1, broker_id = 1, event_timestamp_ms = 1,
    finished_version = $2, last_version = $2, last_xid = pg_current_xact_id(), updated_at = now() WHERE segment_id = $1`, id, 2*i+1)
	return err
}

// runWriteVariant runs op at clients, each call on partition i mod clients of
// a new topic, on a pool of clients connections to dsn, and reports the WAL
// bytes per call.
func runWriteVariant(b *testing.B, dsn string, clients int, op writeFloorOp) {
	w := writeFloor{pool: rstest.NewPool(b, dsn, clients, false), clients: clients, topic: uuid.New()}
	m, err := rs.NewPgManager(b.Context(), w.pool)
	require.NoError(b, err)
	b.Cleanup(m.Close)
	w.m = m
	var before, after int64
	require.NoError(b, w.pool.QueryRow(b.Context(), "SELECT pg_current_wal_lsn() - '0/0'").Scan(&before))
	parallel(b, clients, func(ctx context.Context, rng *rand.Rand) error { return op(ctx, &w, rng) })
	b.StopTimer()
	require.NoError(b, w.pool.QueryRow(b.Context(), "SELECT pg_current_wal_lsn() - '0/0'").Scan(&after))
	b.ReportMetric(float64(after-before)/float64(b.N), "WAL-B/op")
}
