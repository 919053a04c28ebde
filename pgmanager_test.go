package remotestorage_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
)

// TestPgManagerOneRoundTrip checks that every operation that succeeds sends
// exactly one statement once the connection has prepared it, and that a
// refused write spends at most two.
func TestPgManagerOneRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, counter := newCountingPool(t, pgtest.NewDatabase(t))
	m, err := rs.NewPgManager(ctx, pool)
	require.NoError(t, err)
	tp := testTP(0)

	// Every operation, run twice: the first run prepares the statement on the
	// connection (pgx's statement cache), the second must be one round trip.
	ops := []struct {
		name     string
		run      func(i int) error
		maxTrips int64
	}{
		{"Add", func(i int) error {
			return m.AddRemoteLogSegmentMetadata(ctx, segment(tp, int64(i)*100, int64(i)*100+99, map[rs.LeaderEpoch]int64{0: int64(i) * 100, 1: int64(i)*100 + 50}))
		}, 1},
		{"Update", func(i int) error {
			segs, err := m.ListRemoteLogSegments(ctx, tp)
			if err != nil {
				return err
			}
			counter.Take()
			return m.UpdateRemoteLogSegmentMetadata(ctx, update(segs[i], rs.CopySegmentFinished))
		}, 1},
		{"UpdateRefused", func(i int) error {
			segs, err := m.ListRemoteLogSegments(ctx, tp)
			if err != nil {
				return err
			}
			counter.Take()
			if err := m.UpdateRemoteLogSegmentMetadata(ctx, update(segs[i], rs.DeleteSegmentFinished)); !errors.Is(err, rs.ErrInvalidSegmentTransition) {
				return fmt.Errorf("want ErrInvalidSegmentTransition, got %v", err)
			}
			return nil
		}, 1},
		{"Lookup", func(i int) error {
			_, ok, err := m.RemoteLogSegmentMetadata(ctx, tp, 1, int64(i)*100+60)
			if err == nil && !ok {
				err = errors.New("lookup missed")
			}
			return err
		}, 1},
		{"LookupMiss", func(i int) error { _, _, err := m.RemoteLogSegmentMetadata(ctx, tp, 7, 10); return err }, 1},
		{"HighestOffsetForEpoch", func(int) error { _, _, err := m.HighestOffsetForEpoch(ctx, tp, 1); return err }, 1},
		{"ListRemoteLogSegments", func(int) error { _, err := m.ListRemoteLogSegments(ctx, tp); return err }, 1},
		{"ListRemoteLogSegmentsByEpoch", func(int) error { _, err := m.ListRemoteLogSegmentsByEpoch(ctx, tp, 0); return err }, 1},
		{"CaughtUp", func(int) error { _, err := m.CaughtUp(ctx, tp); return err }, 1},
		{"RemoteLogSize", func(int) error { _, err := m.RemoteLogSize(ctx, tp, 0); return err }, 1},
		{"NextSegmentWithTxnIndex", func(int) error { _, _, err := m.NextSegmentWithTxnIndex(ctx, tp, 0, 0); return err }, 1},
		{"FirstSegmentForTimestamp", func(int) error { _, _, err := m.FirstSegmentForTimestamp(ctx, tp, 1, 0, 60); return err }, 1},
		{"EpochEndOffset", func(int) error { _, _, err := m.EpochEndOffset(ctx, tp, 0); return err }, 1},
		{"PutPartitionDeleteMarked", func(int) error {
			return m.PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{TopicIDPartition: testTP(3), State: rs.DeletePartitionMarked})
		}, 1},
		{"PutPartitionDeleteRefused", func(int) error {
			err := m.PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{TopicIDPartition: testTP(4), State: rs.DeletePartitionFinished})
			if !errors.Is(err, rs.ErrInvalidPartitionDeleteTransition) {
				return fmt.Errorf("want ErrInvalidPartitionDeleteTransition, got %v", err)
			}
			return nil
		}, 2},
	}
	for _, op := range ops {
		for i := range 2 {
			counter.Take()
			require.NoError(t, op.run(i), op.name)
			trips, queries := counter.Take()
			if i == 1 {
				require.LessOrEqualf(t, trips, op.maxTrips, "%s sent %d statements: %v", op.name, trips, queries)
				t.Logf("%-28s %d round trip(s)", op.name, trips)
			}
		}
	}
}

// TestPgManagerNoSequentialScans loads 100k segments and checks every query's
// plan, custom and generic: no sequential scan of the segment tables, and a
// miss reads a handful of buffers, not the epoch's history.
func TestPgManagerNoSequentialScans(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.NewDatabase(t)
	pool, counter := newCountingPool(t, dsn)
	m, err := rs.NewPgManager(ctx, pool)
	require.NoError(t, err)

	// 100 partitions × 1000 finished segments of 90 offsets with gaps of 10,
	// ten epochs per partition, the first segment of each epoch carrying two.
	const partitions, perPartition = 100, 1000
	_, err = pool.Exec(ctx, `
INSERT INTO rlmm_partitions (topic_id, partition, topic, max_segment_span)
SELECT md5('topic')::uuid, p, 'bench', 89 FROM generate_series(0, 99) p;
INSERT INTO rlmm_segments (topic_id, partition, segment_id, topic, start_offset, end_offset, max_timestamp_ms,
    broker_id, event_timestamp_ms, segment_size_bytes, state, txn_index_empty, epochs, epoch_start_offsets,
    added_version, finished_version, last_version, last_xid)
SELECT md5('topic')::uuid, p, md5(p || '/' || i)::uuid, 'bench', i * 100, i * 100 + 89, 0, 1, 0, 1000, 1, true,
    CASE WHEN i % 100 = 0 AND i > 0 THEN ARRAY[i / 100 - 1, i / 100] ELSE ARRAY[i / 100] END,
    CASE WHEN i % 100 = 0 AND i > 0 THEN ARRAY[i * 100, i * 100 + 40]::bigint[] ELSE ARRAY[i * 100]::bigint[] END,
    2 * i + 1, 2 * i + 2, 2 * i + 2, pg_current_xact_id()
FROM generate_series(0, 99) p, generate_series(0, 999) i;
SELECT setval('rlmm_versions', 2 * 1000);
INSERT INTO rlmm_segment_epochs (topic_id, partition, segment_id, epoch, first_offset, last_offset, state,
    segment_start_offset, segment_end_offset, added_version, finished_version, last_version, segment_size_bytes, max_timestamp_ms)
SELECT s.topic_id, s.partition, s.segment_id, s.epochs[k], s.epoch_start_offsets[k],
    coalesce(s.epoch_start_offsets[k + 1] - 1, s.end_offset), s.state, s.start_offset, s.end_offset,
    s.added_version, s.finished_version, s.last_version, s.segment_size_bytes, s.max_timestamp_ms
FROM rlmm_segments s, generate_subscripts(s.epochs, 1) k
WHERE cardinality(s.epochs) > 1;
ANALYZE rlmm_partitions, rlmm_segments, rlmm_segment_epochs;`)
	require.NoError(t, err)

	var topicID uuid.UUID
	require.NoError(t, pool.QueryRow(ctx, "SELECT md5('topic')::uuid").Scan(&topicID))
	tp := rs.TopicIDPartition{TopicID: topicID, Topic: "bench", Partition: 42}
	var total int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM rlmm_segments").Scan(&total))
	require.Equal(t, partitions*perPartition, total)

	// Each case runs the operation through the manager, captures the
	// statement it sent, and explains that statement with the same arguments.
	cases := []struct {
		name       string
		run        func() error
		maxBuffers int
	}{
		{"lookup hit", func() error {
			s, ok, err := m.RemoteLogSegmentMetadata(ctx, tp, 5, 55_020)
			if err == nil && (!ok || s.StartOffset != 55_000) {
				err = fmt.Errorf("lookup: got %v %v", s.StartOffset, ok)
			}
			return err
		}, 40},
		{"lookup miss in a gap", func() error { return expectMiss(m.RemoteLogSegmentMetadata(ctx, tp, 5, 55_095)) }, 20},
		{"lookup miss past the end", func() error { return expectMiss(m.RemoteLogSegmentMetadata(ctx, tp, 9, 10_000_000)) }, 20},
		{"lookup miss in another epoch", func() error { return expectMiss(m.RemoteLogSegmentMetadata(ctx, tp, 3, 95_020)) }, 20},
		{"lookup miss before the start", func() error { return expectMiss(m.RemoteLogSegmentMetadata(ctx, tp, 9, 0)) }, 20},
		{"highest offset", func() error { _, _, err := m.HighestOffsetForEpoch(ctx, tp, 4); return err }, 20},
		{"highest offset unknown epoch", func() error { _, _, err := m.HighestOffsetForEpoch(ctx, tp, 400); return err }, 20},
		{"list by epoch", func() error { _, err := m.ListRemoteLogSegmentsByEpoch(ctx, tp, 4); return err }, 1000},
		{"list", func() error { _, err := m.ListRemoteLogSegments(ctx, tp); return err }, 5000},
		{"remote log size", func() error { _, err := m.RemoteLogSize(ctx, tp, 4); return err }, 1000},
		{"next segment with txn index", func() error { _, _, err := m.NextSegmentWithTxnIndex(ctx, tp, 9, 99_000); return err }, 1000},
		{"caught up", func() error { _, err := m.CaughtUp(ctx, tp); return err }, 20},
	}
	explainPool := newPool(t, dsn, 0, false)
	for _, c := range cases {
		counter.Take()
		require.NoError(t, c.run(), c.name)
		_, queries := counter.Take()
		require.Len(t, queries, 1, c.name)
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			plan, buffers := explain(t, explainPool, mode, queries[0])
			for _, table := range seqScannedTables(plan) {
				require.NotContainsf(t, []string{"rlmm_segments", "rlmm_segment_epochs"}, table, "%s (%s) scans %s sequentially:\n%s", c.name, mode, table, plan)
			}
			require.LessOrEqualf(t, buffers, c.maxBuffers, "%s (%s) touched %d buffers:\n%s", c.name, mode, buffers, plan)
			t.Logf("%-30s %-18s %4d buffers", c.name, mode, buffers)
		}
	}
}

// A store failure wraps ErrIO and keeps its cause: the context's error, or
// the server's *pgconn.PgError.
func TestPgManagerStoreFailures(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	m, err := rs.NewPgManager(t.Context(), pool)
	require.NoError(t, err)
	tp := testTP(0)

	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	_, _, err = m.RemoteLogSegmentMetadata(canceled, tp, 0, 0)
	require.ErrorIs(t, err, rs.ErrIO)
	require.ErrorIs(t, err, context.Canceled)
	err = m.AddRemoteLogSegmentMetadata(canceled, segment(tp, 0, 9, map[rs.LeaderEpoch]int64{0: 0}))
	require.ErrorIs(t, err, rs.ErrIO)
	require.ErrorIs(t, err, context.Canceled)

	_, err = pool.Exec(t.Context(), "DROP TABLE rlmm_segments CASCADE")
	require.NoError(t, err)
	_, _, err = m.RemoteLogSegmentMetadata(t.Context(), tp, 0, 0)
	require.ErrorIs(t, err, rs.ErrIO)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, pgerrcode.UndefinedTable, pgErr.Code)
	require.NotErrorIs(t, err, pgx.ErrNoRows)
	err = m.AddRemoteLogSegmentMetadata(t.Context(), segment(tp, 0, 9, map[rs.LeaderEpoch]int64{0: 0}))
	require.ErrorIs(t, err, rs.ErrIO)
	require.ErrorAs(t, err, &pgErr)
	require.NotErrorIs(t, err, rs.ErrInvalidAdd)
}
