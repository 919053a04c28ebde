package migrations_test

// The database-side guards of the states (rlmm_state_guard, as schema.sql
// shows it): the transition tables the repair functions read must say
// exactly what statemachine.go says; a raw UPDATE of a segment's or an
// epoch row's state, or of a partition's delete state, that does not stamp
// a new version is refused with a message naming the repair function to
// call; the library's own writes, which stamp one, pass.

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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

// requireRawStateChange checks that err is rlmm_state_guard's refusal of a
// raw state change of table: SQLSTATE 23514, constraint
// <table>_raw_state_change, the table named, and a message that mentions
// each of mentions.
func requireRawStateChange(t *testing.T, err error, table string, mentions ...string) {
	t.Helper()
	requireGuardError(t, err, table+"_raw_state_change", mentions...)
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr))
	require.Equal(t, table, pgErr.TableName, pgErr.Message)
	require.Contains(t, pgErr.Hint, "docs/DBA.md")
}

// TestGuardTablesMatchStateMachine fails when the transition tables that
// rlmm_set_segment_state and rlmm_set_partition_delete_state read drift
// from statemachine.go, for every pair of int8 values (so also for values
// that are no state at all), or when the state names they print are not
// the Go names.
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

	// The names the repair functions and the views print are the Go names.
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
// library, then tries to move it, and then its epoch rows, to each state
// with a DBA's plain UPDATE that stamps no new version. Every change is
// refused, whether the state machine allows the transition or not, with
// the constraint <table>_raw_state_change and a message naming
// rlmm_set_segment_state for the segment; nothing changes. An UPDATE to the
// state the row is in changes nothing and passes.
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
				require.Equal(t, int16(from), before.segmentState)
				require.Equal(t, []int16{int16(from), int16(from)}, before.epochStates)
				for _, table := range []string{"rlmm_segments", "rlmm_segment_epochs"} {
					_, err := f.pool.Exec(ctx, "UPDATE "+table+" SET state = $1 WHERE segment_id = $2", int16(to), id.ID)
					if from == to {
						require.NoError(t, err, table)
						continue
					}
					requireRawStateChange(t, err, table, id.ID.String(), "a raw UPDATE of state",
						fmt.Sprintf("call rlmm_set_segment_state('%s', <state>)", id.ID))
				}
				require.Equal(t, before, f.bookkeeping(t, id), "a refused UPDATE changes nothing")
			})
		}
	}
}

// TestGuardPartitionDeleteStateEveryPair drives a partition to each delete
// state through the library, then tries each delete state with a DBA's
// plain UPDATE that leaves delete_version as it is. Every change is refused,
// whether the state machine allows it or not, with the constraint
// rlmm_partitions_raw_state_change and a message naming
// rlmm_set_partition_delete_state for the partition; nothing changes. An
// UPDATE that keeps the delete state passes and leaves delete_version alone.
func TestGuardPartitionDeleteStateEveryPair(t *testing.T) {
	t.Parallel()
	f := newGuardFixture(t)
	ctx := t.Context()
	const none = rs.RemotePartitionDeleteState(-1)
	states := []rs.RemotePartitionDeleteState{none, rs.DeletePartitionMarked, rs.DeletePartitionStarted, rs.DeletePartitionFinished}
	for i, from := range states {
		for _, to := range states {
			t.Run(fmt.Sprintf("%s_to_%s", from, to), func(t *testing.T) {
				tp := f.addSegmentIn(t, rs.CopySegmentStarted).TopicIDPartition
				for _, st := range states[1 : i+1] {
					require.NoError(t, f.m.PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{
						TopicIDPartition: tp, State: st, BrokerID: 1}))
				}
				read := func() (version int64, state *int16) {
					require.NoError(t, f.pool.QueryRow(ctx, "SELECT delete_version, delete_state FROM rlmm_partitions WHERE topic_id = $1 AND partition = $2",
						tp.TopicID, tp.Partition).Scan(&version, &state))
					return version, state
				}
				beforeVersion, beforeState := read()
				if from == none {
					require.Nil(t, beforeState)
				} else {
					require.Equal(t, int16(from), *beforeState)
				}
				var err error
				if to == none {
					_, err = f.pool.Exec(ctx, `UPDATE rlmm_partitions SET delete_state = NULL, delete_broker_id = NULL,
						delete_event_timestamp_ms = NULL WHERE topic_id = $1 AND partition = $2`, tp.TopicID, tp.Partition)
				} else {
					_, err = f.pool.Exec(ctx, `UPDATE rlmm_partitions SET delete_state = $3, delete_broker_id = 7,
						delete_event_timestamp_ms = 0 WHERE topic_id = $1 AND partition = $2`, tp.TopicID, tp.Partition, int16(to))
				}
				afterVersion, afterState := read()
				require.Equal(t, beforeVersion, afterVersion)
				require.Equal(t, beforeState, afterState)
				if from == to {
					require.NoError(t, err)
					return
				}
				requireRawStateChange(t, err, "rlmm_partitions", "partition orders-0 (topic id "+tp.TopicID.String()+")",
					"a raw UPDATE of delete_state", fmt.Sprintf("call rlmm_set_partition_delete_state('%s', 0, <state>)", tp.TopicID))
			})
		}
	}
}

// TestGuardLibraryPathUnchanged: the guards let the library's own writes
// through, as they stamp a new version in the statement that changes a
// state: a greater last_version per write, the epoch rows written by the
// statement itself (command 0 of its transaction) and following the
// segment, the partition row's delete_version left alone by the segments'
// writes, and each partition-delete record moving the delete state and
// delete_version together.
func TestGuardLibraryPathUnchanged(t *testing.T) {
	t.Parallel()
	f := newGuardFixture(t)
	ctx := t.Context()
	id := f.addSegmentIn(t, rs.DeleteSegmentStarted) // add, COPY_FINISHED, DELETE_STARTED
	b := f.bookkeeping(t, id)
	require.Zero(t, b.deleteVersion)
	require.Greater(t, b.lastVersion, *b.finishedVersion)
	require.Equal(t, []*int64{b.finishedVersion, b.finishedVersion}, b.epochFinished)
	require.Equal(t, []int16{2, 2}, b.epochStates)
	require.Equal(t, []int64{0, 0}, f.epochCommandIDs(t, id))

	require.NoError(t, f.m.UpdateRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadataUpdate{
		SegmentID: id, State: rs.DeleteSegmentFinished, BrokerID: 1, EventTimestampMs: 1}))
	after := f.bookkeeping(t, id)
	require.Zero(t, after.deleteVersion)
	require.Greater(t, after.lastVersion, b.lastVersion)
	require.Equal(t, []int16{3, 3}, after.epochStates)
	require.Equal(t, []int64{0, 0}, f.epochCommandIDs(t, id))

	tp := id.TopicIDPartition
	previous := int64(0)
	for _, st := range []rs.RemotePartitionDeleteState{rs.DeletePartitionMarked, rs.DeletePartitionStarted, rs.DeletePartitionFinished} {
		require.NoError(t, f.m.PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{
			TopicIDPartition: tp, State: st, BrokerID: 1}))
		var version int64
		var state int16
		require.NoError(t, f.pool.QueryRow(ctx, "SELECT delete_version, delete_state FROM rlmm_partitions WHERE topic_id = $1 AND partition = $2",
			tp.TopicID, tp.Partition).Scan(&version, &state))
		require.Greater(t, version, previous, st.String())
		require.Equal(t, int16(st), state)
		previous = version
	}
}

// TestGuardStatesAreValidated: a value that is no state is refused by the
// column's domain (rlmm_segment_state, rlmm_delete_state) whether or not it
// comes with a new version, before the guard runs; a known state without a
// new version is refused by the guard.
func TestGuardStatesAreValidated(t *testing.T) {
	t.Parallel()
	f := newGuardFixture(t)
	ctx := t.Context()
	id := f.addSegmentIn(t, rs.CopySegmentFinished)
	tp := id.TopicIDPartition
	before := f.bookkeeping(t, id)
	domainViolation := func(domain string) string {
		return fmt.Sprintf(`value for domain %s violates check constraint "%s_check"`, domain, domain)
	}

	// A state the machine does not know is refused by the column's domain,
	// before the guard looks at the versions; a known one without a new
	// version, by the guard.
	for _, table := range []string{"rlmm_segments", "rlmm_segment_epochs"} {
		_, err := f.pool.Exec(ctx, "UPDATE "+table+" SET state = 2 WHERE segment_id = $1", id.ID)
		requireRawStateChange(t, err, table, id.ID.String(), "rlmm_set_segment_state(")
		for _, set := range []string{"state = 7", "state = 7, last_version = last_version + 1"} {
			_, err = f.pool.Exec(ctx, "UPDATE "+table+" SET "+set+" WHERE segment_id = $1", id.ID)
			requireGuardError(t, err, "rlmm_segment_state_check", domainViolation("rlmm_segment_state"))
		}
	}
	require.Equal(t, before, f.bookkeeping(t, id))

	_, err := f.pool.Exec(ctx, `UPDATE rlmm_partitions SET delete_state = 0, delete_broker_id = 1, delete_event_timestamp_ms = 1
		WHERE topic_id = $1 AND partition = $2`, tp.TopicID, tp.Partition)
	requireRawStateChange(t, err, "rlmm_partitions", tp.TopicID.String(), "rlmm_set_partition_delete_state(")
	for _, bump := range []string{"", ", delete_version = delete_version + 1"} {
		_, err = f.pool.Exec(ctx, `UPDATE rlmm_partitions SET delete_state = 9, delete_broker_id = 1, delete_event_timestamp_ms = 1`+bump+`
			WHERE topic_id = $1 AND partition = $2`, tp.TopicID, tp.Partition)
		requireGuardError(t, err, "rlmm_delete_state_check", domainViolation("rlmm_delete_state"))
	}
	require.Equal(t, before, f.bookkeeping(t, id))
}
