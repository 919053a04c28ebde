package rlmmtest

import (
	"testing"

	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
)

func (e *env) requireEpochEnd(tp rs.TopicIDPartition, epoch rs.LeaderEpoch, want int64, wantOK bool) {
	e.t.Helper()
	got, ok, err := e.m.EpochEndOffset(e.ctx, tp, epoch)
	require.NoError(e.t, err, "EpochEndOffset(%s, %d)", tp, epoch)
	require.Equal(e.t, wantOK, ok, "EpochEndOffset(%s, %d) found", tp, epoch)
	if !wantOK {
		want = 0
	}
	require.Equal(e.t, want, got, "EpochEndOffset(%s, %d)", tp, epoch)
}

func (s *suite) epochEndOffset(t *testing.T) {
	s.run(t, "none", func(e *env) {
		tp := e.newTP()
		e.requireEpochEnd(tp, 0, 0, false) // unknown partition
		a := e.addSegment(tp, 0, 9, nil)
		e.requireEpochEnd(tp, 0, 0, false) // COPY_SEGMENT_STARTED does not count
		e.to(&a, rs.DeleteSegmentStarted)
		e.requireEpochEnd(tp, 0, 0, false) // nor one deleted before it finished
		e.addFinished(tp, 10, 19, epochs{1: 10})
		e.requireEpochEnd(tp, 0, 0, false)
		e.requireEpochEnd(tp, 2, 0, false)
		e.requireEpochEnd(tp, -1, 0, false)
		e.requireEpochEnd(withPartition(tp, 1), 1, 0, false)
	})

	s.run(t, "unclean_election", func(e *env) {
		// Leader L1 uploads [0..100] with epochs {0: 0, 1: 50}. After an
		// unclean election L2's cache is {0: 0, 2: 80}: asking for epoch 0,
		// L2 must learn 49, not 100, or it would take 50..79 as uploaded.
		tp := e.newTP()
		e.addFinished(tp, 0, 100, epochs{0: 0, 1: 50})
		e.requireEpochEnd(tp, 0, 49, true)
		e.requireEpochEnd(tp, 1, 100, true)
		e.requireHighest(tp, 0, 100, true) // HighestOffsetForEpoch keeps its own meaning (API.md)
		e.requireEpochEnd(tp, 2, 0, false)
	})

	s.run(t, "max_over_finished_segments", func(e *env) {
		tp := e.newTP()
		e.addFinished(tp, 0, 99, nil)
		e.requireEpochEnd(tp, 0, 99, true)
		e.addFinished(tp, 50, 149, epochs{0: 50, 1: 120}) // overlaps: epoch 0 ends at 119
		e.requireEpochEnd(tp, 0, 119, true)
		e.requireEpochEnd(tp, 1, 149, true)
		e.addFinished(tp, 60, 110, nil) // ends earlier: no change
		e.requireEpochEnd(tp, 0, 119, true)
		b := e.addSegment(tp, 150, 299, epochs{1: 150, 3: 200})
		e.requireEpochEnd(tp, 1, 149, true)
		e.requireEpochEnd(tp, 3, 0, false)
		e.to(&b, rs.CopySegmentFinished)
		e.requireEpochEnd(tp, 1, 199, true)
		e.requireEpochEnd(tp, 3, 299, true)
		e.to(&b, rs.CopySegmentFinished) // a retry changes nothing
		e.requireEpochEnd(tp, 1, 199, true)
		e.requireEpochEnd(tp, 3, 299, true)
	})

	s.run(t, "deletes_never_lower_it", func(e *env) {
		tp := e.newTP()
		a := e.addFinished(tp, 0, 99, epochs{0: 0})
		b := e.addFinished(tp, 100, 199, epochs{0: 100, 1: 150})
		e.requireEpochEnd(tp, 0, 149, true)
		e.to(&b, rs.DeleteSegmentStarted)
		e.requireEpochEnd(tp, 0, 149, true)
		e.requireEpochEnd(tp, 1, 199, true)
		e.requireHighest(tp, 1, 0, false) // HighestOffsetForEpoch drops it
		e.to(&b, rs.DeleteSegmentFinished)
		e.to(&a, rs.DeleteSegmentStarted)
		e.to(&a, rs.DeleteSegmentFinished)
		e.requireList(tp)
		e.requireEpochEnd(tp, 0, 149, true)
		e.requireEpochEnd(tp, 1, 199, true)
		e.requireHighest(tp, 0, 0, false)
		// A shorter segment finished later does not lower it either.
		e.addFinished(tp, 0, 9, epochs{0: 0})
		e.requireEpochEnd(tp, 0, 149, true)
	})

	s.run(t, "partition_delete_finished_forgets_it", func(e *env) {
		tp := e.newTP()
		other := withPartition(tp, 1)
		e.addFinished(tp, 0, 99, nil)
		e.addFinished(other, 0, 49, nil)
		e.mustPutDelete(tp, rs.DeletePartitionMarked)
		e.requireEpochEnd(tp, 0, 99, true)
		e.mustPutDelete(tp, rs.DeletePartitionStarted)
		e.requireEpochEnd(tp, 0, 99, true)
		e.mustPutDelete(tp, rs.DeletePartitionFinished)
		e.requireEpochEnd(tp, 0, 0, false)
		e.mustPutDelete(tp, rs.DeletePartitionFinished) // a retry
		e.requireEpochEnd(tp, 0, 0, false)
		e.requireEpochEnd(other, 0, 49, true)
	})
}
