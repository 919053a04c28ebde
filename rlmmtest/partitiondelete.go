package rlmmtest

import (
	"testing"

	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
)

func (s *suite) partitionDelete(t *testing.T) {
	s.run(t, "full_flow", func(e *env) {
		tp := e.newTP()
		a := e.addFinished(tp, 0, 9, nil)
		b := e.addSegment(tp, 10, 19, nil)
		c := e.addFinished(tp, 20, 29, nil)
		e.to(&c, rs.DeleteSegmentStarted)

		e.mustPutDelete(tp, rs.DeletePartitionMarked)
		requireSentinel(e.t, e.m.AddRemoteLogSegmentMetadata(e.ctx, e.segment(tp, 30, 39, nil)), rs.ErrInvalidAdd, "add once MARKED")
		e.to(&b, rs.CopySegmentFinished)
		e.requireSegmentsAsStored(tp, a, b, c)

		e.mustPutDelete(tp, rs.DeletePartitionStarted)
		requireSentinel(e.t, e.m.AddRemoteLogSegmentMetadata(e.ctx, e.segment(tp, 30, 39, nil)), rs.ErrInvalidAdd, "add once STARTED")
		e.to(&a, rs.DeleteSegmentStarted)
		e.to(&c, rs.DeleteSegmentFinished)
		e.requireSegmentsAsStored(tp, a, b, c)

		e.mustPutDelete(tp, rs.DeletePartitionFinished)
		e.requireForgotten(tp, a, b, c)
		requireSentinel(e.t, e.m.AddRemoteLogSegmentMetadata(e.ctx, e.segment(tp, 30, 39, nil)), rs.ErrInvalidAdd, "add once FINISHED")
		// The forgotten ids stay taken, anywhere.
		for _, seg := range []rs.RemoteLogSegmentMetadata{a, b, c} {
			again := e.segment(e.newTP(), 0, 9, nil)
			again.SegmentID.ID = seg.SegmentID.ID
			requireSentinel(e.t, e.m.AddRemoteLogSegmentMetadata(e.ctx, again), rs.ErrInvalidAdd, "id of a deleted partition's segment")
		}
	})

	s.run(t, "adds_refused_once_marked", func(e *env) {
		tp := e.newTP()
		e.addFinished(tp, 0, 9, nil)
		for _, st := range deleteStates {
			e.mustPutDelete(tp, st)
			bad := e.segment(tp, 100, 109, nil)
			requireSentinel(e.t, e.m.AddRemoteLogSegmentMetadata(e.ctx, bad), rs.ErrInvalidAdd, "add in %s", st)
			for _, seg := range e.list(tp) {
				require.NotEqual(e.t, bad.SegmentID.ID, seg.SegmentID.ID)
			}
		}
	})

	s.run(t, "updates_allowed_while_marked_and_started", func(e *env) {
		tp := e.newTP()
		a := e.addSegment(tp, 0, 9, nil)
		b := e.addSegment(tp, 10, 19, nil)
		e.mustPutDelete(tp, rs.DeletePartitionMarked)
		e.to(&a, rs.CopySegmentFinished)
		e.to(&b, rs.DeleteSegmentStarted)
		e.requireSegmentsAsStored(tp, a, b)
		e.mustPutDelete(tp, rs.DeletePartitionStarted)
		e.to(&a, rs.CopySegmentFinished)
		e.to(&a, rs.DeleteSegmentStarted)
		e.to(&b, rs.DeleteSegmentFinished)
		e.requireSegmentsAsStored(tp, a, b)
		// Refused transitions are still refused.
		requireSentinel(e.t, e.m.UpdateRemoteLogSegmentMetadata(e.ctx, e.updateFor(a, rs.CopySegmentFinished)), rs.ErrInvalidSegmentTransition)
		e.requireSegmentsAsStored(tp, a, b)
	})

	s.run(t, "delete_state_reported", func(e *env) {
		states, ok := e.m.(rs.PartitionDeleteStates)
		if !ok {
			return // the manager does not report delete states
		}
		requireState := func(tp rs.TopicIDPartition, want rs.RemotePartitionDeleteState, wantFound bool) {
			e.t.Helper()
			got, found, err := states.PartitionDeleteState(e.ctx, tp)
			require.NoError(e.t, err)
			require.Equal(e.t, wantFound, found, "%s has a delete record", tp)
			if wantFound {
				require.Equal(e.t, want, got, "delete state of %s", tp)
			}
		}
		tp := e.newTP()
		requireState(tp, 0, false) // never seen
		e.addFinished(tp, 0, 9, nil)
		requireState(tp, 0, false)
		for _, st := range deleteStates {
			e.mustPutDelete(tp, st)
			requireState(tp, st, true)
		}
		requireState(e.newTP(), 0, false) // another partition is untouched
	})

	s.run(t, "finished_forgets_everything", func(e *env) {
		tp := e.newTP()
		a := e.addFinished(tp, 0, 99, epochs{0: 0, 1: 50})
		b := e.addSegment(tp, 100, 199, epochs{1: 100})
		c := e.addFinished(tp, 200, 299, epochs{1: 200})
		e.to(&c, rs.DeleteSegmentStarted)
		e.mustPutDelete(tp, rs.DeletePartitionMarked, rs.DeletePartitionStarted, rs.DeletePartitionFinished)
		e.requireForgotten(tp, a, b, c)
	})

	s.run(t, "idempotent_retries", func(e *env) {
		tp := e.newTP()
		a := e.addFinished(tp, 0, 9, nil)
		e.mustPutDelete(tp, rs.DeletePartitionMarked, rs.DeletePartitionMarked, rs.DeletePartitionMarked)
		e.requirePartitionDeleteState(tp, rs.DeletePartitionMarked, true, a)
		e.mustPutDelete(tp, rs.DeletePartitionStarted, rs.DeletePartitionStarted)
		e.requirePartitionDeleteState(tp, rs.DeletePartitionStarted, true, a)
		e.mustPutDelete(tp, rs.DeletePartitionFinished, rs.DeletePartitionFinished)
		e.requirePartitionDeleteState(tp, rs.DeletePartitionFinished, true, a)
	})

	s.run(t, "invalid_transitions", func(e *env) {
		tp := e.newTP()
		a := e.addFinished(tp, 0, 9, nil)
		bad := func(to rs.RemotePartitionDeleteState) {
			e.t.Helper()
			requireSentinel(e.t, e.putDelete(tp, to), rs.ErrInvalidPartitionDeleteTransition, "to %s", deleteStateName(to, true))
		}
		bad(rs.DeletePartitionStarted) // none -> STARTED
		bad(rs.DeletePartitionFinished)
		bad(7)
		e.requirePartitionDeleteState(tp, 0, false, a)
		// requirePartitionDeleteState added a segment as its last probe.
		tp = e.newTP()
		a = e.addFinished(tp, 0, 9, nil)
		e.mustPutDelete(tp, rs.DeletePartitionMarked)
		bad(rs.DeletePartitionFinished) // MARKED -> FINISHED
		bad(-1)
		e.requirePartitionDeleteState(tp, rs.DeletePartitionMarked, true, a)
		e.mustPutDelete(tp, rs.DeletePartitionStarted)
		bad(rs.DeletePartitionMarked) // backward
		e.requirePartitionDeleteState(tp, rs.DeletePartitionStarted, true, a)
		e.mustPutDelete(tp, rs.DeletePartitionFinished)
		bad(rs.DeletePartitionMarked) // FINISHED -> MARKED
		bad(rs.DeletePartitionStarted)
		bad(3)
		e.requirePartitionDeleteState(tp, rs.DeletePartitionFinished, true, a)
	})

	s.run(t, "other_partition_unaffected", func(e *env) {
		tp := e.newTP()
		p1 := withPartition(tp, 1)
		other := e.newTP()
		a := e.addFinished(tp, 0, 9, nil)
		b := e.addFinished(p1, 0, 9, nil)
		c := e.addFinished(other, 0, 9, nil)
		e.mustPutDelete(tp, rs.DeletePartitionMarked)
		d := e.addFinished(p1, 10, 19, nil)
		e.mustPutDelete(tp, rs.DeletePartitionStarted, rs.DeletePartitionFinished)
		e.requireForgotten(tp, a)
		e.requireSegmentsAsStored(p1, b, d)
		e.requireSegmentsAsStored(other, c)
		e.to(&b, rs.DeleteSegmentStarted)
		f := e.addFinished(p1, 20, 29, nil)
		e.requireSegmentsAsStored(p1, b, d, f)
		e.requireHighest(p1, 0, 29, true)
		// p1 has its own, empty, delete state.
		e.requirePartitionDeleteState(p1, 0, false, b, d, f)
	})

	s.run(t, "partition_never_written_can_be_marked", func(e *env) {
		tp := e.newTP()
		e.mustPutDelete(tp, rs.DeletePartitionMarked)
		e.requirePartitionDeleteState(tp, rs.DeletePartitionMarked, true)
	})
}

// requireForgotten checks that tp answers as if it had no segments at all and
// that the given segments can no longer be updated.
func (e *env) requireForgotten(tp rs.TopicIDPartition, segs ...rs.RemoteLogSegmentMetadata) {
	e.t.Helper()
	e.requireList(tp)
	for _, seg := range segs {
		for ep, start := range seg.SegmentLeaderEpochs {
			e.requireListByEpoch(tp, ep)
			e.requireLookup(tp, ep, start, nil)
			e.requireLookup(tp, ep, seg.EndOffset, nil)
			e.requireHighest(tp, ep, 0, false)
			e.requireSize(tp, ep, 0)
			e.requireNextTxn(tp, ep, start, nil)
		}
		for _, to := range []rs.RemoteLogSegmentState{rs.CopySegmentFinished, rs.DeleteSegmentStarted, rs.DeleteSegmentFinished} {
			requireSentinel(e.t, e.m.UpdateRemoteLogSegmentMetadata(e.ctx, e.updateFor(seg, to)), rs.ErrSegmentNotFound, "update of a forgotten segment to %s", to)
		}
	}
}
