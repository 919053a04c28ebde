package remotestorage_test

// The database side of EpochEndOffset (migration 00004): the backfill of
// existing deployments, the Down migration, and the guard trigger raising
// the epoch ends for a DBA's manual COPY_SEGMENT_FINISHED.

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/migrations"
)

func requireEpochEnd(t *testing.T, m rs.KafkaExtensions, tp rs.TopicIDPartition, epoch rs.LeaderEpoch, want int64, wantOK bool) {
	t.Helper()
	got, ok, err := m.EpochEndOffset(t.Context(), tp, epoch)
	require.NoError(t, err)
	require.Equal(t, [2]any{want, wantOK}, [2]any{got, ok}, "EpochEndOffset(%s, %d)", tp, epoch)
}

// insertRawSegment stores a segment and its epoch rows as the library would
// have, by hand (for schemas older than the code).
func insertRawSegment(t *testing.T, ctx context.Context, exec func(ctx context.Context, sql string, args ...any) error,
	tp rs.TopicIDPartition, version int64, start, end int64, state int16, finished bool, epochs []int32, firsts []int64) {
	t.Helper()
	var finishedVersion *int64
	if finished {
		v := version + 1
		finishedVersion = &v
	}
	require.NoError(t, exec(ctx, `
INSERT INTO rlmm_segments (topic_id, partition, segment_id, topic, start_offset, end_offset, max_timestamp_ms,
    broker_id, event_timestamp_ms, segment_size_bytes, state, txn_index_empty, epochs, epoch_start_offsets,
    added_version, finished_version, last_version)
VALUES ($1, $2, $3, $4, $5, $6, 1000, 1, 0, 10, $7, true, $8, $9, $10::bigint, $11::bigint, $10::bigint + 2)`,
		tp.TopicID, tp.Partition, uuid.New(), tp.Topic, start, end, state, epochs, firsts, version, finishedVersion))
	require.NoError(t, exec(ctx, `
INSERT INTO rlmm_segment_epochs (topic_id, partition, segment_id, epoch, first_offset, last_offset, state,
    segment_start_offset, segment_end_offset, added_version, finished_version, last_version)
SELECT s.topic_id, s.partition, s.segment_id, s.epochs[k], s.epoch_start_offsets[k],
    coalesce(s.epoch_start_offsets[k + 1] - 1, s.end_offset), s.state, s.start_offset, s.end_offset,
    s.added_version, s.finished_version, s.last_version
FROM rlmm_segments s, generate_subscripts(s.epochs, 1) k
WHERE s.topic_id = $1 AND s.partition = $2 AND s.added_version = $3`, tp.TopicID, tp.Partition, version))
}

// TestEpochEndsBackfill: a database at 00002 with finished, deleted and
// unfinished segments, and a deleted partition, migrated up: the epoch ends
// are what the library would have raised. Down removes them; up again
// restores them.
func TestEpochEndsBackfill(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := emptyPool(t)
	provider, err := migrations.NewProvider(stdlib.OpenDBFromPool(pool))
	require.NoError(t, err)
	_, err = provider.UpTo(ctx, 2)
	require.NoError(t, err)
	exec := func(ctx context.Context, sql string, args ...any) error {
		_, err := pool.Exec(ctx, sql, args...)
		return err
	}

	live := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "live", Partition: 0}
	gone := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "gone", Partition: 0}
	require.NoError(t, exec(ctx, `INSERT INTO rlmm_partitions (topic_id, partition, topic, version, max_epoch_span) VALUES ($1, 0, 'live', 20, 100)`, live.TopicID))
	require.NoError(t, exec(ctx, `INSERT INTO rlmm_partitions (topic_id, partition, topic, version, max_epoch_span, delete_state, delete_broker_id, delete_event_timestamp_ms)
		VALUES ($1, 0, 'gone', 20, 100, 2, 1, 1)`, gone.TopicID))
	// L1's segment [0..100] with epochs {0: 0, 1: 50}, finished.
	insertRawSegment(t, ctx, exec, live, 1, 0, 100, 1, true, []int32{0, 1}, []int64{0, 50})
	// Finished, then deleted: still counts.
	insertRawSegment(t, ctx, exec, live, 4, 101, 200, 3, true, []int32{1}, []int64{101})
	// Never finished: does not count.
	insertRawSegment(t, ctx, exec, live, 7, 201, 300, 0, false, []int32{1, 2}, []int64{201, 250})
	insertRawSegment(t, ctx, exec, gone, 1, 0, 100, 1, true, []int32{0}, []int64{0})

	_, err = provider.Up(ctx)
	require.NoError(t, err)
	m, err := rs.NewPgManager(ctx, pool)
	require.NoError(t, err)
	requireEpochEnd(t, m, live, 0, 49, true)
	requireEpochEnd(t, m, live, 1, 200, true)
	requireEpochEnd(t, m, live, 2, 0, false)
	requireEpochEnd(t, m, gone, 0, 0, false)
	// The walk's bound is backfilled too: the finished segment [0..100]
	// reaches offset 100 of epoch 1.
	s, ok, err := m.FirstSegmentForTimestamp(ctx, live, 1, 0, 100)
	require.NoError(t, err)
	require.True(t, ok)
	require.EqualValues(t, 0, s.StartOffset)

	_, err = provider.DownTo(ctx, 2)
	require.NoError(t, err)
	var table *string
	require.NoError(t, pool.QueryRow(ctx, "SELECT to_regclass('rlmm_epoch_ends')::text").Scan(&table))
	require.Nil(t, table, "Down drops rlmm_epoch_ends")
	// The guard trigger is 00002's again: a manual finish works without the table.
	require.NoError(t, exec(ctx, "UPDATE rlmm_segments SET state = 1 WHERE topic_id = $1 AND added_version = 7", live.TopicID))
	_, err = provider.Up(ctx)
	require.NoError(t, err)
	// Re-applied, the backfill counts the segment finished meanwhile.
	requireEpochEnd(t, m, live, 1, 249, true)
	requireEpochEnd(t, m, live, 2, 300, true)
	requireEpochEnd(t, m, live, 0, 49, true)
}

// TestGuardManualFinishRaisesEpochEnds: a DBA's allowed manual UPDATE to
// COPY_SEGMENT_FINISHED raises the epoch ends as the library does, a
// manual delete does not lower them, and a cached manager of another broker
// sees the raise.
func TestGuardManualFinishRaisesEpochEnds(t *testing.T) {
	t.Parallel()
	f := newGuardFixture(t)
	ctx := t.Context()
	id := f.addSegmentIn(t, rs.CopySegmentStarted) // [0..99], epochs {0: 0, 1: 20}
	tp := id.TopicIDPartition
	cached, err := rs.NewPgManager(ctx, f.pool, rs.WithCache())
	require.NoError(t, err)
	t.Cleanup(cached.Close)
	require.NoError(t, cached.OnPartitionLeadershipChanges(ctx, []rs.TopicIDPartition{tp}, nil))
	waitLoaded(t, cached, tp)
	requireEpochEnd(t, f.m, tp, 0, 0, false)
	requireEpochEnd(t, cached, tp, 0, 0, false)

	_, err = f.pool.Exec(ctx, "UPDATE rlmm_segments SET state = 1 WHERE segment_id = $1", id.ID)
	require.NoError(t, err)
	requireEpochEnd(t, f.m, tp, 0, 19, true)
	requireEpochEnd(t, f.m, tp, 1, 99, true)
	var raised, version int64
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT max(e.raised_version), max(p.version) FROM rlmm_epoch_ends e
		JOIN rlmm_partitions p USING (topic_id, partition) WHERE e.topic_id = $1`, tp.TopicID).Scan(&raised, &version))
	require.Equal(t, version, raised, "raised at the version the trigger gave the write")
	caughtUp(cached).WaitUntil(t, "the cache caught up", func() bool {
		ok, err := cached.CaughtUp(ctx, tp)
		return err == nil && ok
	})
	requireEpochEnd(t, cached, tp, 0, 19, true)
	requireEpochEnd(t, cached, tp, 1, 99, true)

	for _, state := range []rs.RemoteLogSegmentState{rs.DeleteSegmentStarted, rs.DeleteSegmentFinished} {
		_, err = f.pool.Exec(ctx, "UPDATE rlmm_segments SET state = $1 WHERE segment_id = $2", int16(state), id.ID)
		require.NoError(t, err)
		requireEpochEnd(t, f.m, tp, 0, 19, true)
	}
	_, found, err := f.m.HighestOffsetForEpoch(ctx, tp, 0)
	require.NoError(t, err)
	require.False(t, found, "the segment is forgotten")

	// A broker that loads the partition only now still learns the epoch ends.
	late, err := rs.NewPgManager(ctx, f.pool, rs.WithCache())
	require.NoError(t, err)
	t.Cleanup(late.Close)
	require.NoError(t, late.OnPartitionLeadershipChanges(ctx, nil, []rs.TopicIDPartition{tp}))
	waitLoaded(t, late, tp)
	requireEpochEnd(t, late, tp, 0, 19, true)
	requireEpochEnd(t, late, tp, 1, 99, true)
}
