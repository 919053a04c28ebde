package rlmmtest

import (
	"testing"

	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
)

var segmentStates = []rs.RemoteLogSegmentState{
	rs.CopySegmentStarted, rs.CopySegmentFinished, rs.DeleteSegmentStarted, rs.DeleteSegmentFinished,
}

// segmentTargets are the states an update may name: the four, and two values
// that are none of them.
var segmentTargets = append(append([]rs.RemoteLogSegmentState{}, segmentStates...), 7, -1)

// segmentTransitions runs one subtest per cell of the segment transition
// table, "<from>_to_<to>", plus "unknown_segment_to_<to>".
func (s *suite) segmentTransitions(t *testing.T) {
	for _, from := range segmentStates {
		for _, to := range segmentTargets {
			s.run(t, stateName(from)+"_to_"+stateName(to), func(e *env) { e.segmentTransitionCell(from, to) })
		}
	}
	for _, to := range segmentTargets {
		s.run(t, "unknown_segment_to_"+stateName(to), func(e *env) {
			tp := e.newTP()
			other := e.addFinished(tp, 0, 9, nil)
			u := e.updateFor(e.segment(tp, 10, 19, nil), to) // never added
			want := rs.ErrSegmentNotFound
			if !updateTargetAllowed(to) {
				want = rs.ErrInvalidSegmentTransition // checked before anything else
			}
			requireSentinel(e.t, e.m.UpdateRemoteLogSegmentMetadata(e.ctx, u), want, "update of unknown segment to %s", stateName(to))
			e.requireSegmentsAsStored(tp, other)
		})
	}
}

// segmentTransitionCell brings two segments to from (one to be updated
// without custom metadata, one with), asks for to, and reads back.
func (e *env) segmentTransitionCell(from, to rs.RemoteLogSegmentState) {
	tp := e.newTP()
	want := expectedSegmentTransition(from, to)
	var segs []rs.RemoteLogSegmentMetadata
	for i, newMetadata := range []bool{false, true} {
		seg := e.addSegment(tp, int64(10*i), int64(10*i+9), nil)
		e.reach(&seg, from)
		u := e.updateFor(seg, to)
		if newMetadata {
			u.CustomMetadata = []byte("replaced")
		}
		err := e.m.UpdateRemoteLogSegmentMetadata(e.ctx, u)
		if want == nil {
			require.NoError(e.t, err, "%s -> %s is allowed", stateName(from), stateName(to))
			seg = applyUpdate(seg, u)
		} else {
			requireSentinel(e.t, err, want, "%s -> %s is refused", stateName(from), stateName(to))
			require.Contains(e.t, err.Error(), seg.SegmentID.ID.String(), "the error names the segment")
		}
		segs = append(segs, seg)
	}
	// Accepted: State, BrokerID, EventTimestampMs taken, CustomMetadata kept
	// (nil) or replaced. Refused: nothing changed. DELETE_SEGMENT_FINISHED:
	// absent from the list.
	e.requireSegmentsAsStored(tp, segs...)
}

var deleteStates = []rs.RemotePartitionDeleteState{
	rs.DeletePartitionMarked, rs.DeletePartitionStarted, rs.DeletePartitionFinished,
}

// deleteTargets are the states a partition-delete record may name: the three
// and two values that are none of them.
var deleteTargets = append(append([]rs.RemotePartitionDeleteState{}, deleteStates...), 3, -1)

// partitionDeleteTransitions runs one subtest per cell of the partition-delete
// transition table, "<from>_to_<to>" with from NONE for no record.
func (s *suite) partitionDeleteTransitions(t *testing.T) {
	type fromState struct {
		state rs.RemotePartitionDeleteState
		has   bool
	}
	froms := []fromState{{0, false}}
	for _, st := range deleteStates {
		froms = append(froms, fromState{st, true})
	}
	for _, from := range froms {
		for _, to := range deleteTargets {
			name := deleteStateName(from.state, from.has) + "_to_" + deleteStateName(to, true)
			s.run(t, name, func(e *env) {
				tp := e.newTP()
				finished := e.addFinished(tp, 0, 9, nil)
				started := e.addSegment(tp, 10, 19, nil)
				if from.has {
					for _, st := range deleteStates[:from.state+1] {
						e.mustPutDelete(tp, st)
					}
				}
				want := expectedPartitionDeleteTransition(from.state, from.has, to)
				err := e.putDelete(tp, to)
				requireResult(e.t, err, want, "partition delete %s -> %s", deleteStateName(from.state, from.has), deleteStateName(to, true))
				state, has := from.state, from.has
				if want == nil {
					state, has = to, true
				}
				e.requirePartitionDeleteState(tp, state, has, finished, started)
			})
		}
	}
}

// requirePartitionDeleteState checks, through the API only, that tp's delete
// state is (state, has) and that its segments are segs (or forgotten, once
// FINISHED). It probes with transitions that succeed only in that state and
// with self-transitions, which change nothing; an add comes last.
func (e *env) requirePartitionDeleteState(tp rs.TopicIDPartition, state rs.RemotePartitionDeleteState, has bool, segs ...rs.RemoteLogSegmentMetadata) {
	e.t.Helper()
	t := e.t
	refused := func(to rs.RemotePartitionDeleteState, why string) {
		t.Helper()
		requireSentinel(t, e.putDelete(tp, to), rs.ErrInvalidPartitionDeleteTransition, "probe %s: %s", deleteStateName(to, true), why)
	}
	probeAdd := e.segment(tp, 1000, 1009, nil)
	switch {
	case !has:
		e.requireSegmentsAsStored(tp, segs...)
		refused(rs.DeletePartitionStarted, "the partition has no delete record, so not MARKED")
		refused(rs.DeletePartitionFinished, "the partition has no delete record, so not STARTED")
		require.NoError(t, e.m.AddRemoteLogSegmentMetadata(e.ctx, probeAdd), "a partition without a delete record accepts adds")
		return
	case state == rs.DeletePartitionMarked:
		e.requireSegmentsAsStored(tp, segs...)
		refused(rs.DeletePartitionFinished, "MARKED may not move to FINISHED")
		require.NoError(t, e.putDelete(tp, rs.DeletePartitionMarked), "MARKED retried")
	case state == rs.DeletePartitionStarted:
		e.requireSegmentsAsStored(tp, segs...)
		refused(rs.DeletePartitionMarked, "STARTED may not move back to MARKED")
		require.NoError(t, e.putDelete(tp, rs.DeletePartitionStarted), "STARTED retried")
	case state == rs.DeletePartitionFinished:
		e.requireList(tp)
		for _, s := range segs {
			e.requireLookup(tp, 0, s.StartOffset, nil)
			e.requireHighest(tp, 0, 0, false)
			requireSentinel(t, e.m.UpdateRemoteLogSegmentMetadata(e.ctx, e.updateFor(s, rs.DeleteSegmentStarted)), rs.ErrSegmentNotFound,
				"updates of a deleted partition's segments")
		}
		refused(rs.DeletePartitionStarted, "FINISHED may not move back to STARTED")
		require.NoError(t, e.putDelete(tp, rs.DeletePartitionFinished), "FINISHED retried")
	default:
		t.Fatalf("bad expected state %d", state)
	}
	requireSentinel(t, e.m.AddRemoteLogSegmentMetadata(e.ctx, probeAdd), rs.ErrInvalidAdd, "a partition with a delete record refuses adds")
}
