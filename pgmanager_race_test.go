package remotestorage_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/testwait"
)

// Writers that race on one segment or one partition's delete record. A
// lock holder, T1, changes the state by hand and stays open; the manager's
// write, T2, starts and waits on the partition's lock; T1 commits. T2 is
// applied after T1, so it must be decided on the state T1 left: it
// succeeds when that state allows it, and a refusal names that state. T2's
// statement took its snapshot before T1 committed, so a statement that
// filtered on what its snapshot saw would decide on the state before T1.

// behindLock runs lockSQL (args) in a transaction T1 on pool, then call in
// the background; once call's statement (whose text contains tag) waits on
// a lock, T1 commits, and behindLock returns call's answer.
func behindLock(t *testing.T, pool *pgxpool.Pool, lockSQL string, args []any, tag string, call func() error) error {
	t.Helper()
	ctx := t.Context()
	t1, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer t1.Rollback(context.Background()) //nolint:errcheck // committed below
	_, err = t1.Exec(ctx, lockSQL, args...)
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() { done <- call() }()
	testwait.Until(t, "T2 to wait on T1's lock", func() bool {
		select {
		case err := <-done:
			t.Fatalf("T2 returned before T1 committed: %v", err)
		default:
		}
		var waiting int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'`, tag).Scan(&waiting))
		return waiting > 0
	})
	require.NoError(t, t1.Commit(ctx))
	return <-done
}

// racingManager returns a manager over pool, WithCache and consuming tp
// when cached.
func racingManager(t *testing.T, pool *pgxpool.Pool, tp rs.TopicIDPartition, cached bool) *rs.PgManager {
	t.Helper()
	if !cached {
		return newManager(t, pool)
	}
	m := newManager(t, pool, rs.WithCache())
	require.NoError(t, m.OnPartitionLeadershipChanges(t.Context(), []rs.TopicIDPartition{tp}, nil))
	waitCaughtUp(t, m, tp)
	return m
}

// An update that waited for a lock holder which moved the segment into a
// state the update may leave succeeds, and the segment ends in the
// update's state.
func TestUpdateBehindALockHolderIsDecidedOnItsState(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		start, holder, update rs.RemoteLogSegmentState // the segment's state, T1's, T2's
	}{
		{rs.CopySegmentFinished, rs.DeleteSegmentStarted, rs.DeleteSegmentFinished},
		{rs.CopySegmentStarted, rs.DeleteSegmentStarted, rs.DeleteSegmentFinished},
		{rs.CopySegmentStarted, rs.CopySegmentFinished, rs.CopySegmentFinished},
		{rs.CopySegmentFinished, rs.DeleteSegmentStarted, rs.DeleteSegmentStarted},
	} {
		for _, cached := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s-then-%s-to-%s-cache-%t", c.start, c.holder, c.update, cached), func(t *testing.T) {
				t.Parallel()
				ctx := t.Context()
				pool := newPool(t, pgtest.NewDatabase(t), 0, false)
				tp := testTP(0)
				m := racingManager(t, pool, tp, cached)
				s := segment(tp, 0, 99, map[rs.LeaderEpoch]int64{0: 0, 1: 50})
				require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, s))
				if c.start != rs.CopySegmentStarted {
					require.NoError(t, m.UpdateRemoteLogSegmentMetadata(ctx, update(s, c.start)))
				}

				err := behindLock(t, pool, `SELECT rlmm_set_segment_state($1, $2)`, []any{s.SegmentID.ID, c.holder.String()}, "SegmentUpdate",
					func() error { return m.UpdateRemoteLogSegmentMetadata(ctx, update(s, c.update)) })
				require.NoErrorf(t, err, "%s to %s is allowed, and the store applied the update after the move to %s", c.holder, c.update, c.holder)

				var state int16
				require.NoError(t, pool.QueryRow(ctx, `SELECT state FROM rlmm_segments WHERE segment_id = $1`, s.SegmentID.ID).Scan(&state))
				require.Equal(t, c.update, rs.RemoteLogSegmentState(state))
				var epochRows int
				require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM rlmm_segment_epochs WHERE segment_id = $1 AND state = $2`,
					s.SegmentID.ID, int16(c.update)).Scan(&epochRows))
				require.Equal(t, 2, epochRows, "the epoch rows follow the segment")

				// What the manager answers, from its cache too, says the same.
				waitCaughtUp(t, m, tp)
				list, err := m.ListRemoteLogSegments(ctx, tp)
				require.NoError(t, err)
				if c.update == rs.DeleteSegmentFinished {
					require.Empty(t, list)
				} else {
					require.Len(t, list, 1)
					require.Equal(t, c.update, list[0].State)
				}
			})
		}
	}
}

// When two writers race, the loser's refusal names the state the winner
// left, not the one the loser's snapshot saw: T1 moves a segment from
// COPY_SEGMENT_STARTED to DELETE_SEGMENT_STARTED; T2 asks for
// COPY_SEGMENT_FINISHED and must say "DELETE_SEGMENT_STARTED to
// COPY_SEGMENT_FINISHED".
func TestRefusalNamesTheStateAfterTheLock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := newPool(t, pgtest.NewDatabase(t), 0, false)
	m := newManager(t, pool)
	tp := testTP(0)
	s := segment(tp, 0, 99, map[rs.LeaderEpoch]int64{0: 0})
	require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, s))

	err := behindLock(t, pool, `SELECT rlmm_set_segment_state($1, 'DELETE_SEGMENT_STARTED')`, []any{s.SegmentID.ID}, "SegmentUpdate",
		func() error { return m.UpdateRemoteLogSegmentMetadata(ctx, update(s, rs.CopySegmentFinished)) })
	require.ErrorIs(t, err, rs.ErrInvalidSegmentTransition)
	require.Truef(t, strings.Contains(err.Error(), "DELETE_SEGMENT_STARTED to COPY_SEGMENT_FINISHED"), "the refusal names a state the segment has left: %v", err)
	found, ok := rs.SegmentStateFound(err)
	require.True(t, ok)
	require.Equal(t, rs.DeleteSegmentStarted, found)
	require.False(t, errors.Is(err, rs.ErrIO))
}

// The same for a partition's delete record: a write that waited for a lock
// holder which moved the record is decided on the record it left.
func TestPartitionDeleteBehindALockHolderIsDecidedOnItsState(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		holder, put rs.RemotePartitionDeleteState
		refusedIn   rs.RemotePartitionDeleteState // 0 with ok: the put succeeds
		refused     bool
	}{
		{holder: rs.DeletePartitionStarted, put: rs.DeletePartitionFinished},
		{holder: rs.DeletePartitionStarted, put: rs.DeletePartitionStarted},
		{holder: rs.DeletePartitionStarted, put: rs.DeletePartitionMarked, refused: true, refusedIn: rs.DeletePartitionStarted},
		{holder: rs.DeletePartitionFinished, put: rs.DeletePartitionStarted, refused: true, refusedIn: rs.DeletePartitionFinished},
	} {
		t.Run(fmt.Sprintf("marked-then-%s-to-%s", c.holder, c.put), func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			pool := newPool(t, pgtest.NewDatabase(t), 0, false)
			m := newManager(t, pool)
			tp := testTP(0)
			writeFinished(t, m, tp, 0, 99)
			put := func(state rs.RemotePartitionDeleteState) error {
				return m.PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{TopicIDPartition: tp, State: state, BrokerID: 2, EventTimestampMs: 1})
			}
			require.NoError(t, put(rs.DeletePartitionMarked))
			if c.holder == rs.DeletePartitionFinished {
				require.NoError(t, put(rs.DeletePartitionStarted))
			}

			err := behindLock(t, pool, `SELECT rlmm_set_partition_delete_state($1, $2, $3)`, []any{tp.TopicID, tp.Partition, c.holder.String()}, "PartitionDelete",
				func() error { return put(c.put) })
			var state int16
			require.NoError(t, pool.QueryRow(ctx, `SELECT delete_state FROM rlmm_partitions WHERE topic_id = $1 AND partition = $2`, tp.TopicID, tp.Partition).Scan(&state))
			if !c.refused {
				require.NoErrorf(t, err, "%s to %s is allowed, and the store applied the write after the move to %s", c.holder, c.put, c.holder)
				require.Equal(t, c.put, rs.RemotePartitionDeleteState(state))
				return
			}
			require.ErrorIs(t, err, rs.ErrInvalidPartitionDeleteTransition)
			found, hasRecord, ok := rs.PartitionDeleteStateFound(err)
			require.True(t, ok)
			require.True(t, hasRecord)
			require.Equal(t, c.refusedIn, found, "the refusal names the state the lock holder left")
			require.Equal(t, c.holder, rs.RemotePartitionDeleteState(state))
		})
	}
}
