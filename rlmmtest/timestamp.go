package rlmmtest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
)

// addWithTimestamp adds a segment of tp whose MaxTimestampMs is ts, in
// COPY_SEGMENT_STARTED.
func (e *env) addWithTimestamp(tp rs.TopicIDPartition, start, end, ts int64, eps epochs) rs.RemoteLogSegmentMetadata {
	e.t.Helper()
	s := e.segment(tp, start, end, eps)
	s.MaxTimestampMs = ts
	e.add(s)
	return s
}

// finishedWithTimestamp is addWithTimestamp then COPY_SEGMENT_FINISHED.
func (e *env) finishedWithTimestamp(tp rs.TopicIDPartition, start, end, ts int64, eps epochs) rs.RemoteLogSegmentMetadata {
	e.t.Helper()
	s := e.addWithTimestamp(tp, start, end, ts, eps)
	e.to(&s, rs.CopySegmentFinished)
	return s
}

// requireFirstForTimestamp checks FirstSegmentForTimestamp(tp, epoch, ts,
// startingOffset): want nil means none, (zero, false, nil).
func (e *env) requireFirstForTimestamp(tp rs.TopicIDPartition, epoch rs.LeaderEpoch, ts, startingOffset int64, want *rs.RemoteLogSegmentMetadata) {
	e.t.Helper()
	got, ok, err := e.m.FirstSegmentForTimestamp(e.ctx, tp, epoch, ts, startingOffset)
	what := fmt.Sprintf("FirstSegmentForTimestamp(epoch %d, timestamp %d, from offset %d)", epoch, ts, startingOffset)
	require.NoError(e.t, err, what)
	if want == nil {
		require.False(e.t, ok, "%s: want none, got [%d, %d] ts %d", what, got.StartOffset, got.EndOffset, got.MaxTimestampMs)
		require.Equal(e.t, rs.RemoteLogSegmentMetadata{}, got, "%s: none returns the zero value", what)
		return
	}
	require.True(e.t, ok, "%s: want [%d, %d] ts %d, got none", what, want.StartOffset, want.EndOffset, want.MaxTimestampMs)
	require.Equal(e.t, want.SegmentID.ID, got.SegmentID.ID, "%s: want [%d, %d] ts %d, got [%d, %d] ts %d",
		what, want.StartOffset, want.EndOffset, want.MaxTimestampMs, got.StartOffset, got.EndOffset, got.MaxTimestampMs)
	requireSameSegment(e.t, *want, got, what)
}

func (s *suite) firstSegmentForTimestamp(t *testing.T) {
	s.run(t, "none", func(e *env) {
		tp := e.newTP()
		e.requireFirstForTimestamp(tp, 0, 0, 0, nil) // unknown partition
		e.addWithTimestamp(tp, 0, 99, 5000, nil)     // not finished
		e.requireFirstForTimestamp(tp, 0, 0, 0, nil)
		e.finishedWithTimestamp(tp, 100, 199, 5000, epochs{1: 100})
		e.requireFirstForTimestamp(tp, 0, 0, 0, nil)                   // epoch 0 only on the unfinished one
		e.requireFirstForTimestamp(tp, 2, 0, 0, nil)                   // epoch never used
		e.requireFirstForTimestamp(tp, 1, 5001, 0, nil)                // timestamp after every segment
		e.requireFirstForTimestamp(tp, 1, 0, 200, nil)                 // offset after every segment
		e.requireFirstForTimestamp(withPartition(tp, 1), 1, 0, 0, nil) // another partition
	})

	s.run(t, "list_order_with_non_monotonic_timestamps", func(e *env) {
		tp := e.newTP()
		a := e.finishedWithTimestamp(tp, 0, 99, 5000, nil)
		b := e.finishedWithTimestamp(tp, 100, 199, 3000, epochs{0: 100})
		c := e.finishedWithTimestamp(tp, 200, 299, 8000, epochs{0: 200})
		d := e.finishedWithTimestamp(tp, 300, 399, 4000, epochs{0: 300})
		e.requireFirstForTimestamp(tp, 0, 0, 0, &a)
		e.requireFirstForTimestamp(tp, 0, 4000, 0, &a) // not d, whose timestamp is closer
		e.requireFirstForTimestamp(tp, 0, 5000, 0, &a) // equal counts
		e.requireFirstForTimestamp(tp, 0, 5001, 0, &c)
		e.requireFirstForTimestamp(tp, 0, 8000, 0, &c)
		e.requireFirstForTimestamp(tp, 0, 8001, 0, nil)
		e.requireFirstForTimestamp(tp, 0, 2000, 150, &b) // inside b
		e.requireFirstForTimestamp(tp, 0, 2000, 99, &a)  // a's last offset
		e.requireFirstForTimestamp(tp, 0, 2000, 100, &b) // b's first offset
		e.requireFirstForTimestamp(tp, 0, 3500, 100, &c) // b is too early in time
		e.requireFirstForTimestamp(tp, 0, 3500, 250, &c)
		e.requireFirstForTimestamp(tp, 0, 3500, 300, &d)
		e.requireFirstForTimestamp(tp, 0, 4001, 300, nil)
		e.requireFirstForTimestamp(tp, 0, 0, 399, &d)
		e.requireFirstForTimestamp(tp, 0, 0, 400, nil)
	})

	s.run(t, "starting_offset_between_segments", func(e *env) {
		tp := e.newTP()
		e.finishedWithTimestamp(tp, 0, 99, 1000, nil)
		b := e.finishedWithTimestamp(tp, 150, 199, 1000, epochs{0: 150})
		e.requireFirstForTimestamp(tp, 0, 0, 120, &b)
		e.requireFirstForTimestamp(tp, 0, 0, 150, &b)
	})

	s.run(t, "ties_go_to_the_first_added", func(e *env) {
		tp := e.newTP()
		a := e.addWithTimestamp(tp, 0, 99, 1000, nil)
		b := e.addWithTimestamp(tp, 0, 149, 2000, nil)
		c := e.addWithTimestamp(tp, 0, 199, 2000, nil)
		// Finished in reverse order: list order is the order added.
		e.to(&c, rs.CopySegmentFinished)
		e.requireFirstForTimestamp(tp, 0, 0, 0, &c)
		e.to(&b, rs.CopySegmentFinished)
		e.requireFirstForTimestamp(tp, 0, 0, 0, &b)
		e.requireFirstForTimestamp(tp, 0, 2000, 0, &b)
		e.to(&a, rs.CopySegmentFinished)
		e.requireFirstForTimestamp(tp, 0, 0, 0, &a)
		e.requireFirstForTimestamp(tp, 0, 1000, 0, &a)
		e.requireFirstForTimestamp(tp, 0, 1001, 0, &b) // a is too early
		e.requireFirstForTimestamp(tp, 0, 0, 100, &b)  // a ends too early
		e.requireFirstForTimestamp(tp, 0, 0, 150, &c)
		// A retried COPY_SEGMENT_FINISHED changes no order.
		e.to(&a, rs.CopySegmentFinished)
		e.requireFirstForTimestamp(tp, 0, 0, 0, &a)
	})

	s.run(t, "only_finished_segments", func(e *env) {
		tp := e.newTP()
		a := e.addWithTimestamp(tp, 0, 99, 9000, nil)
		b := e.finishedWithTimestamp(tp, 100, 199, 9000, epochs{0: 100})
		c := e.finishedWithTimestamp(tp, 200, 299, 9000, epochs{0: 200})
		e.requireFirstForTimestamp(tp, 0, 9000, 0, &b) // a is COPY_SEGMENT_STARTED
		e.to(&b, rs.DeleteSegmentStarted)
		e.requireFirstForTimestamp(tp, 0, 9000, 0, &c)
		e.to(&b, rs.DeleteSegmentFinished)
		e.requireFirstForTimestamp(tp, 0, 9000, 0, &c)
		e.to(&a, rs.CopySegmentFinished)
		e.requireFirstForTimestamp(tp, 0, 9000, 0, &a)
		e.to(&a, rs.DeleteSegmentStarted)
		e.to(&c, rs.DeleteSegmentStarted)
		e.requireFirstForTimestamp(tp, 0, 0, 0, nil)
	})

	s.run(t, "segments_carrying_the_epoch", func(e *env) {
		tp := e.newTP()
		a := e.finishedWithTimestamp(tp, 0, 99, 1000, epochs{0: 0, 1: 50})
		b := e.finishedWithTimestamp(tp, 100, 199, 2000, epochs{1: 100})
		c := e.finishedWithTimestamp(tp, 200, 299, 3000, epochs{1: 200, 2: 250})
		e.requireFirstForTimestamp(tp, 0, 0, 0, &a)
		// EndOffset, not the end of the epoch's range in the segment.
		e.requireFirstForTimestamp(tp, 0, 0, 70, &a)
		e.requireFirstForTimestamp(tp, 0, 0, 100, nil)
		e.requireFirstForTimestamp(tp, 0, 1001, 0, nil)
		e.requireFirstForTimestamp(tp, 1, 0, 0, &a)
		e.requireFirstForTimestamp(tp, 1, 1500, 0, &b)
		e.requireFirstForTimestamp(tp, 1, 2500, 0, &c)
		e.requireFirstForTimestamp(tp, 2, 0, 0, &c)
		e.requireFirstForTimestamp(tp, 2, 0, 210, &c)
		e.requireFirstForTimestamp(tp, 3, 0, 0, nil)
	})

	s.run(t, "long_segment_reaching_the_starting_offset", func(e *env) {
		tp := e.newTP()
		// A long segment with several epochs starts long before the offset
		// and still reaches it; later short ones overlap it.
		long := e.finishedWithTimestamp(tp, 0, 9999, 5000, epochs{0: 0, 1: 10, 2: 9000})
		var short []rs.RemoteLogSegmentMetadata
		for i := range int64(5) {
			short = append(short, e.finishedWithTimestamp(tp, 9000+10*i, 9009+10*i, 6000+i, epochs{2: 9000 + 10*i}))
		}
		e.requireFirstForTimestamp(tp, 0, 0, 9999, &long)
		e.requireFirstForTimestamp(tp, 2, 0, 9999, &long)
		e.requireFirstForTimestamp(tp, 2, 5001, 9000, &short[0])
		e.requireFirstForTimestamp(tp, 2, 6003, 9000, &short[3])
		e.requireFirstForTimestamp(tp, 2, 6000, 9025, &short[2])
		e.requireFirstForTimestamp(tp, 2, 0, 10000, nil)
	})

	s.run(t, "negative_inputs", func(e *env) {
		tp := e.newTP()
		a := e.finishedWithTimestamp(tp, 0, 99, 0, nil)
		b := e.finishedWithTimestamp(tp, 100, 199, 1000, epochs{0: 100})
		e.requireFirstForTimestamp(tp, 0, -1, -1, &a)
		e.requireFirstForTimestamp(tp, 0, -1<<62, -1<<62, &a)
		e.requireFirstForTimestamp(tp, 0, 1, -5, &b)
		e.requireFirstForTimestamp(tp, -1, 0, 0, nil)
		e.requireFirstForTimestamp(tp, 0, 1<<62, 0, nil)
		e.requireFirstForTimestamp(tp, 0, 0, 1<<62, nil)
	})

	s.run(t, "partition_delete", func(e *env) {
		tp := e.newTP()
		other := withPartition(tp, 1)
		a := e.finishedWithTimestamp(tp, 0, 99, 1000, nil)
		o := e.finishedWithTimestamp(other, 0, 99, 1000, nil)
		e.mustPutDelete(tp, rs.DeletePartitionMarked, rs.DeletePartitionStarted)
		e.requireFirstForTimestamp(tp, 0, 0, 0, &a)
		e.mustPutDelete(tp, rs.DeletePartitionFinished)
		e.requireFirstForTimestamp(tp, 0, 0, 0, nil)
		e.requireFirstForTimestamp(other, 0, 0, 0, &o)
	})
}
