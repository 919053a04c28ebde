package remotestorage_test

// The database-side guards (the guard triggers, as schema.sql shows them):
// the transition tables the triggers read must say exactly what
// statemachine.go says, a manual UPDATE outside the state machines fails
// with a message a DBA can act on, and an allowed one gets the library's
// bookkeeping (epoch rows, versions).

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
)

// readPairs reads a two-column smallint table into a set.
func readPairs(t *testing.T, pool *pgxpool.Pool, sql string) map[[2]int16]bool {
	t.Helper()
	rows, err := pool.Query(t.Context(), sql)
	require.NoError(t, err)
	pairs := map[[2]int16]bool{}
	var from, to int16
	_, err = pgx.ForEachRow(rows, []any{&from, &to}, func() error {
		pairs[[2]int16{from, to}] = true
		return nil
	})
	require.NoError(t, err)
	return pairs
}

// TestGuardTablesMatchStateMachine fails when the transition tables that the
// triggers read drift from statemachine.go, for every pair of int8 values
// (so also for values that are no state at all).
func TestGuardTablesMatchStateMachine(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)

	segmentPairs := readPairs(t, pool, "SELECT from_state, to_state FROM rlmm_segment_transitions")
	partitionPairs := readPairs(t, pool, "SELECT from_state, to_state FROM rlmm_partition_delete_transitions")
	const none = -1 // the tables' code for "no delete record"
	for from := math.MinInt8; from <= math.MaxInt8; from++ {
		for to := math.MinInt8; to <= math.MaxInt8; to++ {
			pair := [2]int16{int16(from), int16(to)}
			require.Equal(t,
				rs.SegmentTransitionAllowed(rs.RemoteLogSegmentState(from), rs.RemoteLogSegmentState(to)),
				segmentPairs[pair], "segment transition %d -> %d", from, to)
			goAllows := false
			if from == none {
				goAllows = rs.PartitionDeleteTransitionAllowed(0, false, rs.RemotePartitionDeleteState(to))
			} else {
				goAllows = rs.PartitionDeleteTransitionAllowed(rs.RemotePartitionDeleteState(from), true, rs.RemotePartitionDeleteState(to))
			}
			require.Equal(t, goAllows, partitionPairs[pair], "partition delete transition %d -> %d", from, to)
		}
	}

	// The names the triggers and the views print are the Go names.
	names := func(sql string) map[int16]string {
		rows, err := pool.Query(t.Context(), sql)
		require.NoError(t, err)
		out := map[int16]string{}
		var code int16
		var name string
		_, err = pgx.ForEachRow(rows, []any{&code, &name}, func() error {
			out[code] = name
			return nil
		})
		require.NoError(t, err)
		return out
	}
	wantSegment := map[int16]string{}
	for s := rs.RemoteLogSegmentState(0); s.Valid(); s++ {
		wantSegment[int16(s)] = s.String()
	}
	require.Equal(t, wantSegment, names("SELECT state, name FROM rlmm_segment_states"))
	wantPartition := map[int16]string{none: rs.RemotePartitionDeleteState(none).String()}
	for s := rs.RemotePartitionDeleteState(0); s.Valid(); s++ {
		wantPartition[int16(s)] = s.String()
	}
	require.Equal(t, wantPartition, names("SELECT state, name FROM rlmm_partition_delete_states"))
}

// TestGuardSegmentStateEveryPair drives a segment to each state through the
// library, then tries to move it to each state with a DBA's plain UPDATE.
func TestGuardSegmentStateEveryPair(t *testing.T) {
	t.Parallel()
	f := newGuardFixture(t)
	ctx := t.Context()
	states := []rs.RemoteLogSegmentState{rs.CopySegmentStarted, rs.CopySegmentFinished, rs.DeleteSegmentStarted, rs.DeleteSegmentFinished}
	for _, from := range states {
		for _, to := range states {
			t.Run(fmt.Sprintf("%s_to_%s", from, to), func(t *testing.T) {
				id := f.addSegmentIn(t, from)
				before := f.bookkeeping(t, id)
				_, err := f.pool.Exec(ctx, "UPDATE rlmm_segments SET state = $1 WHERE segment_id = $2", int16(to), id.ID)
				after := f.bookkeeping(t, id)
				if from == to {
					// Changes nothing, so fires no trigger: even
					// COPY_SEGMENT_STARTED to itself, which the library
					// refuses, is harmless here.
					require.NoError(t, err)
					require.Equal(t, before, after)
					return
				}
				if !rs.SegmentTransitionAllowed(from, to) {
					requireGuardError(t, err, "rlmm_segments_state_transition",
						id.ID.String(), from.String()+" -> "+to.String(), "rlmmctl segments set-state "+id.ID.String())
					require.Equal(t, before, after, "a refused UPDATE changes nothing")
					return
				}
				require.NoError(t, err)
				// The library's bookkeeping, done by the trigger.
				require.Equal(t, before.partitionVersion+1, after.partitionVersion)
				require.Equal(t, int16(to), after.segmentState)
				require.Equal(t, after.partitionVersion, after.lastVersion)
				require.Equal(t, []int16{int16(to), int16(to)}, after.epochStates)
				require.Equal(t, []*int64{after.finishedVersion, after.finishedVersion}, after.epochFinished)
				if to == rs.CopySegmentFinished {
					require.Equal(t, &after.partitionVersion, after.finishedVersion)
				} else {
					require.Equal(t, before.finishedVersion, after.finishedVersion)
				}
			})
		}
	}
}

// TestGuardManualRepairIsSeenByTheLibrary: after a DBA finishes a copy by
// hand, brokers' lookups find the segment, exactly as after the library's
// update; a later library update still works.
func TestGuardManualRepairIsSeenByTheLibrary(t *testing.T) {
	t.Parallel()
	f := newGuardFixture(t)
	ctx := t.Context()
	id := f.addSegmentIn(t, rs.CopySegmentStarted)
	tp := id.TopicIDPartition

	_, found, err := f.m.RemoteLogSegmentMetadata(ctx, tp, 1, 50)
	require.NoError(t, err)
	require.False(t, found)

	_, err = f.pool.Exec(ctx, "UPDATE rlmm_segments SET state = 1, broker_id = 42 WHERE segment_id = $1", id.ID)
	require.NoError(t, err)

	got, found, err := f.m.RemoteLogSegmentMetadata(ctx, tp, 1, 50)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, id, got.SegmentID)
	require.Equal(t, rs.CopySegmentFinished, got.State)
	require.EqualValues(t, 42, got.BrokerID)
	highest, found, err := f.m.HighestOffsetForEpoch(ctx, tp, 0)
	require.NoError(t, err)
	require.True(t, found)
	require.EqualValues(t, 99, highest)

	// The library goes on from the repaired state.
	require.NoError(t, f.m.UpdateRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadataUpdate{
		SegmentID: id, State: rs.DeleteSegmentStarted, BrokerID: 1}))
	_, found, err = f.m.RemoteLogSegmentMetadata(ctx, tp, 1, 50)
	require.NoError(t, err)
	require.False(t, found)
	require.Equal(t, int16(rs.DeleteSegmentStarted), f.bookkeeping(t, id).epochStates[1])
}

// TestGuardLibraryPathUnchanged: the triggers add nothing to the library's
// own writes: one version per write, epoch rows written once.
func TestGuardLibraryPathUnchanged(t *testing.T) {
	t.Parallel()
	f := newGuardFixture(t)
	id := f.addSegmentIn(t, rs.DeleteSegmentStarted) // add, COPY_FINISHED, DELETE_STARTED
	b := f.bookkeeping(t, id)
	require.EqualValues(t, 3, b.partitionVersion)
	require.EqualValues(t, 3, b.lastVersion)
	require.Equal(t, int64(2), *b.finishedVersion)
	require.Equal(t, []*int64{b.finishedVersion, b.finishedVersion}, b.epochFinished)
	require.Equal(t, []int16{2, 2}, b.epochStates)
	// The epoch rows were last written by the library's statement itself
	// (command 0 of its transaction), not again by a trigger (a later
	// command of the same transaction).
	require.Equal(t, []int64{0, 0}, f.epochCommandIDs(t, id))

	// A manual UPDATE is one command; the trigger's write of the epoch
	// rows comes after it.
	_, err := f.pool.Exec(t.Context(), "UPDATE rlmm_segments SET state = 3 WHERE segment_id = $1", id.ID)
	require.NoError(t, err)
	for _, cid := range f.epochCommandIDs(t, id) {
		require.Positive(t, cid)
	}
}

// TestGuardEpochRowsFollowTheSegment: the epoch rows cannot be moved on
// their own.
func TestGuardEpochRowsFollowTheSegment(t *testing.T) {
	t.Parallel()
	f := newGuardFixture(t)
	id := f.addSegmentIn(t, rs.CopySegmentStarted)
	before := f.bookkeeping(t, id)
	_, err := f.pool.Exec(t.Context(), "UPDATE rlmm_segment_epochs SET state = 1, finished_version = 1 WHERE segment_id = $1", id.ID)
	requireGuardError(t, err, "rlmm_segment_epochs_state_follows_segment",
		id.ID.String(), "Update rlmm_segments.state instead", "rlmmctl segments set-state")
	require.Equal(t, before, f.bookkeeping(t, id))
}

// TestGuardForgottenPartition: the segments of a deleted partition are
// forgotten; the guard refuses to move them, as the library does.
func TestGuardForgottenPartition(t *testing.T) {
	t.Parallel()
	f := newGuardFixture(t)
	ctx := t.Context()
	id := f.addSegmentIn(t, rs.CopySegmentFinished)
	for _, st := range []rs.RemotePartitionDeleteState{rs.DeletePartitionMarked, rs.DeletePartitionStarted, rs.DeletePartitionFinished} {
		require.NoError(t, f.m.PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{
			TopicIDPartition: id.TopicIDPartition, State: st, BrokerID: 1}))
	}
	_, err := f.pool.Exec(ctx, "UPDATE rlmm_segments SET state = 2 WHERE segment_id = $1", id.ID)
	requireGuardError(t, err, "rlmm_segments_state_transition", id.ID.String(), "DELETE_PARTITION_FINISHED")
}

// TestGuardPartitionDeleteStateEveryPair drives a partition to each delete
// state through the library, then tries each delete state by hand.
func TestGuardPartitionDeleteStateEveryPair(t *testing.T) {
	t.Parallel()
	f := newGuardFixture(t)
	ctx := t.Context()
	const none = rs.RemotePartitionDeleteState(-1)
	states := []rs.RemotePartitionDeleteState{none, rs.DeletePartitionMarked, rs.DeletePartitionStarted, rs.DeletePartitionFinished}
	allowed := func(from, to rs.RemotePartitionDeleteState) bool {
		if to == none {
			return from == none // no write at all
		}
		return rs.PartitionDeleteTransitionAllowed(from, from != none, to)
	}
	for i, from := range states {
		for _, to := range states {
			t.Run(fmt.Sprintf("%s_to_%s", from, to), func(t *testing.T) {
				tp := f.addSegmentIn(t, rs.CopySegmentStarted).TopicIDPartition
				for _, st := range states[1 : i+1] {
					require.NoError(t, f.m.PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{
						TopicIDPartition: tp, State: st, BrokerID: 1}))
				}
				version := func() int64 {
					var version int64
					require.NoError(t, f.pool.QueryRow(ctx, "SELECT version FROM rlmm_partitions WHERE topic_id = $1", tp.TopicID).Scan(&version))
					return version
				}
				before := version()
				var err error
				if to == none {
					_, err = f.pool.Exec(ctx, `UPDATE rlmm_partitions SET delete_state = NULL, delete_broker_id = NULL,
						delete_event_timestamp_ms = NULL WHERE topic_id = $1`, tp.TopicID)
				} else {
					_, err = f.pool.Exec(ctx, `UPDATE rlmm_partitions SET delete_state = $2, delete_broker_id = 7,
						delete_event_timestamp_ms = 0 WHERE topic_id = $1`, tp.TopicID, int16(to))
				}
				if !allowed(from, to) {
					requireGuardError(t, err, "rlmm_partitions_delete_state_transition",
						"orders-0", tp.TopicID.String(), from.String()+" -> "+to.String(), "rlmmctl partitions set-delete-state")
					require.Equal(t, before, version())
					return
				}
				require.NoError(t, err)
				if from == to {
					require.Equal(t, before, version())
				} else {
					require.Equal(t, before+1, version(), "the trigger bumps the version of a manual change")
				}
			})
		}
	}
}

// TestGuardStatesAreValidated: a value that is no state is refused by the
// guard before the CHECK constraint sees it, with the same advice.
func TestGuardStatesAreValidated(t *testing.T) {
	t.Parallel()
	f := newGuardFixture(t)
	id := f.addSegmentIn(t, rs.CopySegmentFinished)
	_, err := f.pool.Exec(context.Background(), "UPDATE rlmm_segments SET state = 7 WHERE segment_id = $1", id.ID)
	requireGuardError(t, err, "rlmm_segments_state_transition", "COPY_SEGMENT_FINISHED -> unknown state 7")
}
