package rlmmtest

import (
	"bytes"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
)

type epochs = map[rs.LeaderEpoch]int64

// probe is one lookup and its expected answer (nil: a miss).
type probe struct {
	epoch  rs.LeaderEpoch
	offset int64
	want   *rs.RemoteLogSegmentMetadata
}

func (e *env) requireProbes(tp rs.TopicIDPartition, probes []probe) {
	e.t.Helper()
	for _, p := range probes {
		e.requireLookup(tp, p.epoch, p.offset, p.want)
	}
}

func (s *suite) lookup(t *testing.T) {
	s.run(t, "epoch_boundaries", func(e *env) {
		tp := e.newTP()
		seg := e.addFinished(tp, 0, 100, epochs{0: 0, 1: 20, 2: 80})
		e.requireProbes(tp, []probe{
			{0, 0, &seg}, {0, 19, &seg}, {0, 20, nil},
			{1, 19, nil}, {1, 20, &seg}, {1, 79, &seg}, {1, 80, nil},
			{2, 79, nil}, {2, 80, &seg}, {2, 100, &seg}, {2, 101, nil},
			{0, -1, nil}, {3, 100, nil}, {-1, 50, nil},
		})
	})

	s.run(t, "before_first_and_after_last_segment", func(e *env) {
		tp := e.newTP()
		a := e.addFinished(tp, 50, 99, nil)
		b := e.addFinished(tp, 100, 149, epochs{0: 100})
		e.requireProbes(tp, []probe{
			{0, -1, nil}, {0, 0, nil}, {0, 49, nil}, {0, 50, &a}, {0, 99, &a},
			{0, 100, &b}, {0, 149, &b}, {0, 150, nil}, {0, 1 << 40, nil},
		})
	})

	s.run(t, "offsets_before_first_epoch_start", func(e *env) {
		tp := e.newTP()
		seg := e.addFinished(tp, 0, 100, epochs{5: 10})
		e.requireProbes(tp, []probe{{5, 0, nil}, {5, 9, nil}, {5, 10, &seg}, {5, 100, &seg}, {4, 5, nil}, {0, 5, nil}})
	})

	s.run(t, "unknown_epoch", func(e *env) {
		tp := e.newTP()
		e.addFinished(tp, 0, 100, epochs{1: 0, 3: 50})
		e.requireProbes(tp, []probe{{0, 10, nil}, {2, 10, nil}, {2, 60, nil}, {4, 60, nil}, {1 << 30, 60, nil}})
	})

	s.run(t, "unknown_partition", func(e *env) {
		tp := e.newTP()
		seg := e.addFinished(tp, 0, 100, nil)
		for _, other := range []rs.TopicIDPartition{withPartition(tp, 1), e.newTP(), {TopicID: uuid.New(), Topic: tp.Topic, Partition: 0}} {
			e.requireProbes(other, []probe{{0, 0, nil}, {0, 50, nil}})
			e.requireHighest(other, 0, 0, false)
		}
		e.requireLookup(tp, 0, 50, &seg)
	})

	s.run(t, "only_COPY_SEGMENT_FINISHED_visible", func(e *env) {
		tp := e.newTP()
		started := e.addSegment(tp, 0, 9, nil)
		finished := e.addFinished(tp, 10, 19, nil)
		deleting := e.addFinished(tp, 20, 29, nil)
		e.to(&deleting, rs.DeleteSegmentStarted)
		deleted := e.addFinished(tp, 30, 39, nil)
		e.to(&deleted, rs.DeleteSegmentStarted)
		e.to(&deleted, rs.DeleteSegmentFinished)
		e.requireProbes(tp, []probe{{0, 0, nil}, {0, 9, nil}, {0, 10, &finished}, {0, 19, &finished}, {0, 20, nil}, {0, 29, nil}, {0, 30, nil}, {0, 39, nil}})
		e.requireHighest(tp, 0, 19, true)
		e.requireList(tp, started, finished, deleting)
	})

	s.run(t, "returns_full_metadata", func(e *env) {
		tp := e.newTP()
		seg := e.segment(tp, 7, 77, epochs{2: 7, 9: 40})
		seg.TxnIndexEmpty = false
		seg.CustomMetadata = []byte{0, 0xff, 'x'}
		seg.MaxTimestampMs = 123456789
		e.add(seg)
		u := e.updateFor(seg, rs.CopySegmentFinished)
		u.CustomMetadata = []byte("finished")
		require.NoError(e.t, e.m.UpdateRemoteLogSegmentMetadata(e.ctx, u))
		seg = applyUpdate(seg, u)
		e.requireLookup(tp, 2, 39, &seg)
		e.requireLookup(tp, 9, 77, &seg)
	})
}

func (s *suite) overlaps(t *testing.T) {
	s.run(t, "10-100_then_5-50", func(e *env) {
		tp := e.newTP()
		a := e.addFinished(tp, 10, 100, nil)
		b := e.addFinished(tp, 5, 50, nil)
		e.requireProbes(tp, []probe{{0, 4, nil}, {0, 5, &b}, {0, 9, &b}, {0, 10, &a}, {0, 50, &a}, {0, 51, &a}, {0, 100, &a}, {0, 101, nil}})
		e.requireList(tp, b, a)
	})

	s.run(t, "10-100_then_10-150", func(e *env) {
		tp := e.newTP()
		a := e.addFinished(tp, 10, 100, nil)
		b := e.addFinished(tp, 10, 150, nil)
		e.requireProbes(tp, []probe{{0, 9, nil}, {0, 10, &b}, {0, 100, &b}, {0, 101, &b}, {0, 150, &b}, {0, 151, nil}})
		e.requireList(tp, a, b)
	})

	s.run(t, "10-150_then_10-100", func(e *env) {
		tp := e.newTP()
		a := e.addFinished(tp, 10, 150, nil)
		b := e.addFinished(tp, 10, 100, nil)
		e.requireProbes(tp, []probe{{0, 10, &b}, {0, 100, &b}, {0, 101, &a}, {0, 150, &a}})
	})

	s.run(t, "four_overlapping", func(e *env) {
		tp := e.newTP()
		// Ranges of epoch 0: s1 [0,99], s2 [50,149], s3 [20,60], s4 [40,129];
		// of epoch 1: s4 [130,200].
		s1 := e.addFinished(tp, 0, 99, nil)
		s2 := e.addFinished(tp, 50, 149, nil)
		s3 := e.addFinished(tp, 20, 60, nil)
		s4 := e.addFinished(tp, 40, 200, epochs{0: 40, 1: 130})
		e.requireProbes(tp, []probe{
			{0, 0, &s1}, {0, 19, &s1}, {0, 20, &s3}, {0, 39, &s3}, {0, 40, &s4}, {0, 49, &s4},
			{0, 50, &s2}, {0, 60, &s2}, {0, 61, &s2}, {0, 99, &s2}, {0, 100, &s2}, {0, 129, &s2},
			{0, 149, &s2}, {0, 150, nil}, {0, 200, nil},
			{1, 129, nil}, {1, 130, &s4}, {1, 200, &s4}, {1, 201, nil},
		})
		e.requireList(tp, s1, s3, s4, s2)
		// Deleting the winner uncovers the next latest start.
		e.to(&s2, rs.DeleteSegmentStarted)
		e.requireProbes(tp, []probe{{0, 50, &s4}, {0, 60, &s4}, {0, 129, &s4}, {0, 130, nil}, {0, 99, &s4}})
		e.to(&s4, rs.DeleteSegmentStarted)
		e.requireProbes(tp, []probe{{0, 40, &s3}, {0, 60, &s3}, {0, 61, &s1}, {0, 99, &s1}, {0, 100, nil}, {1, 130, nil}})
	})

	s.run(t, "latest_epoch_range_start_wins_not_latest_segment_start", func(e *env) {
		tp := e.newTP()
		// Epoch 1's range: a [60,100], b [50,100]. a starts earlier as a
		// segment but its range of epoch 1 starts later.
		a := e.addFinished(tp, 0, 100, epochs{0: 0, 1: 60})
		b := e.addFinished(tp, 50, 100, epochs{1: 50})
		e.requireProbes(tp, []probe{{1, 50, &b}, {1, 59, &b}, {1, 60, &a}, {1, 100, &a}, {0, 55, &a}})
	})

	for _, order := range []string{"in_add_order", "in_reverse_order"} {
		s.run(t, "equal_ranges_finished_"+order, func(e *env) {
			tp := e.newTP()
			a := e.addSegment(tp, 10, 100, nil)
			b := e.addSegment(tp, 10, 100, nil)
			first, last := &a, &b
			if order == "in_reverse_order" {
				first, last = &b, &a
			}
			e.to(first, rs.CopySegmentFinished)
			e.requireLookup(tp, 0, 50, first)
			e.to(last, rs.CopySegmentFinished)
			e.requireProbes(tp, []probe{{0, 10, last}, {0, 50, last}, {0, 100, last}})
			// A retried COPY_SEGMENT_FINISHED on the earlier one changes nothing.
			e.to(first, rs.CopySegmentFinished)
			e.requireProbes(tp, []probe{{0, 10, last}, {0, 50, last}, {0, 100, last}})
			e.to(last, rs.CopySegmentFinished)
			e.requireProbes(tp, []probe{{0, 50, last}})
			e.requireList(tp, a, b) // ties by the order added, whatever the finish order
			// Once the winner is being deleted the other one shows.
			e.to(last, rs.DeleteSegmentStarted)
			e.requireProbes(tp, []probe{{0, 10, first}, {0, 100, first}})
		})
	}

	s.run(t, "shadowing_segment_not_finished", func(e *env) {
		tp := e.newTP()
		a := e.addFinished(tp, 0, 100, nil)
		b := e.addSegment(tp, 50, 100, nil)
		e.requireProbes(tp, []probe{{0, 49, &a}, {0, 50, &a}, {0, 100, &a}})
		e.to(&b, rs.CopySegmentFinished)
		e.requireProbes(tp, []probe{{0, 49, &a}, {0, 50, &b}, {0, 100, &b}})
		e.to(&b, rs.DeleteSegmentStarted)
		e.requireProbes(tp, []probe{{0, 50, &a}, {0, 100, &a}})
		e.to(&b, rs.DeleteSegmentFinished)
		e.requireProbes(tp, []probe{{0, 50, &a}, {0, 100, &a}})
	})
}

func (s *suite) highestOffsetForEpoch(t *testing.T) {
	s.run(t, "none", func(e *env) {
		tp := e.newTP()
		e.requireHighest(tp, 0, 0, false)
		e.addSegment(tp, 0, 9, nil)
		e.requireHighest(tp, 0, 0, false)
		e.addFinished(tp, 10, 19, epochs{1: 10})
		e.requireHighest(tp, 0, 0, false)
		e.requireHighest(tp, 2, 0, false)
		e.requireHighest(withPartition(tp, 1), 1, 0, false)
	})

	s.run(t, "max_end_offset_over_finished", func(e *env) {
		tp := e.newTP()
		e.addFinished(tp, 0, 99, nil)
		e.requireHighest(tp, 0, 99, true)
		e.addFinished(tp, 100, 199, epochs{0: 100})
		e.requireHighest(tp, 0, 199, true)
		e.addFinished(tp, 50, 150, nil) // overlaps, ends earlier
		e.requireHighest(tp, 0, 199, true)
		e.addSegment(tp, 200, 299, nil) // not finished
		e.requireHighest(tp, 0, 199, true)
	})

	s.run(t, "multi_epoch_segment_counts_for_each_epoch", func(e *env) {
		tp := e.newTP()
		e.addFinished(tp, 0, 99, epochs{0: 0})
		e.addFinished(tp, 100, 199, epochs{0: 100, 1: 120, 2: 150})
		// API.md's definition: the segment's EndOffset, not the end of the
		// epoch inside it.
		e.requireHighest(tp, 0, 199, true)
		e.requireHighest(tp, 1, 199, true)
		e.requireHighest(tp, 2, 199, true)
		e.requireHighest(tp, 3, 0, false)
	})

	s.run(t, "drops_after_delete_started", func(e *env) {
		tp := e.newTP()
		e.addFinished(tp, 0, 99, epochs{0: 0})
		b := e.addFinished(tp, 100, 199, epochs{0: 100, 1: 150})
		e.requireHighest(tp, 0, 199, true)
		e.requireHighest(tp, 1, 199, true)
		e.to(&b, rs.DeleteSegmentStarted)
		e.requireHighest(tp, 0, 99, true)
		e.requireHighest(tp, 1, 0, false)
		e.to(&b, rs.DeleteSegmentFinished)
		e.requireHighest(tp, 0, 99, true)
	})
}

func (s *suite) lists(t *testing.T) {
	s.run(t, "order_by_start_offset", func(e *env) {
		tp := e.newTP()
		c := e.addSegment(tp, 200, 299, epochs{1: 200})
		a := e.addFinished(tp, 0, 99, nil)
		b := e.addSegment(tp, 100, 199, epochs{0: 100, 1: 150})
		d := e.addFinished(tp, 50, 60, nil)
		e.requireList(tp, a, d, b, c)
		e.requireListByEpoch(tp, 0, a, d, b)
		e.requireListByEpoch(tp, 1, b, c)
	})

	s.run(t, "ties_by_add_order", func(e *env) {
		tp := e.newTP()
		// Ids chosen so that id order is the reverse of add order.
		idList := []uuid.UUID{uuid.New(), uuid.New(), uuid.New(), uuid.New()}
		slices.SortFunc(idList, func(x, y uuid.UUID) int { return -bytes.Compare(x[:], y[:]) })
		var segs []rs.RemoteLogSegmentMetadata
		for i, id := range idList {
			seg := e.segment(tp, 10, int64(20+10*(i%2)), nil)
			seg.SegmentID.ID = id
			e.add(seg)
			segs = append(segs, seg)
		}
		// Finish in another order again.
		for _, i := range []int{2, 0, 3} {
			e.to(&segs[i], rs.CopySegmentFinished)
		}
		e.requireList(tp, segs...)
		e.requireListByEpoch(tp, 0, segs...)
		early := e.addSegment(tp, 5, 30, nil)
		e.requireList(tp, append([]rs.RemoteLogSegmentMetadata{early}, segs...)...)
	})

	s.run(t, "states_included_and_forgotten_excluded", func(e *env) {
		tp := e.newTP()
		started := e.addSegment(tp, 0, 9, nil)
		finished := e.addFinished(tp, 10, 19, nil)
		deleting := e.addFinished(tp, 20, 29, nil)
		e.to(&deleting, rs.DeleteSegmentStarted)
		deletingFromStarted := e.addSegment(tp, 30, 39, nil)
		e.to(&deletingFromStarted, rs.DeleteSegmentStarted)
		deleted := e.addFinished(tp, 40, 49, nil)
		e.to(&deleted, rs.DeleteSegmentStarted)
		e.to(&deleted, rs.DeleteSegmentFinished)
		e.requireList(tp, started, finished, deleting, deletingFromStarted)
		e.requireListByEpoch(tp, 0, started, finished, deleting, deletingFromStarted)
		for _, s := range e.list(tp) {
			require.NotEqual(e.t, deleted.SegmentID.ID, s.SegmentID.ID)
		}
	})

	s.run(t, "by_epoch_restricted_to_segments_carrying_it", func(e *env) {
		tp := e.newTP()
		a := e.addFinished(tp, 0, 99, epochs{0: 0, 2: 50})
		b := e.addSegment(tp, 100, 199, epochs{2: 100, 3: 150})
		c := e.addFinished(tp, 200, 299, epochs{5: 200})
		e.requireListByEpoch(tp, 0, a)
		e.requireListByEpoch(tp, 1)
		e.requireListByEpoch(tp, 2, a, b)
		e.requireListByEpoch(tp, 3, b)
		e.requireListByEpoch(tp, 4)
		e.requireListByEpoch(tp, 5, c)
		e.requireListByEpoch(tp, -1)
	})

	s.run(t, "forgotten_id_reuse_refused", func(e *env) {
		tp := e.newTP()
		seg := e.addSegment(tp, 0, 9, nil)
		e.reach(&seg, rs.DeleteSegmentFinished)
		e.requireList(tp)
		again := e.segment(tp, 0, 9, nil)
		again.SegmentID = seg.SegmentID
		requireSentinel(e.t, e.m.AddRemoteLogSegmentMetadata(e.ctx, again), rs.ErrInvalidAdd)
		again.SegmentID.TopicIDPartition = e.newTP()
		requireSentinel(e.t, e.m.AddRemoteLogSegmentMetadata(e.ctx, again), rs.ErrInvalidAdd)
		e.requireList(tp)
		e.requireList(again.SegmentID.TopicIDPartition)
	})

	s.run(t, "unknown_partition_empty", func(e *env) {
		tp := e.newTP()
		e.addFinished(tp, 0, 9, nil)
		for _, other := range []rs.TopicIDPartition{withPartition(tp, 1), e.newTP()} {
			require.Len(e.t, e.list(other), 0)
			require.Len(e.t, e.listByEpoch(other, 0), 0)
		}
		require.Len(e.t, e.listByEpoch(tp, 1), 0)
	})

	s.run(t, "partitions_kept_apart", func(e *env) {
		tp := e.newTP()
		p1 := withPartition(tp, 1)
		a := e.addFinished(tp, 0, 9, nil)
		b := e.addFinished(p1, 0, 9, nil)
		e.requireList(tp, a)
		e.requireList(p1, b)
		e.requireLookup(tp, 0, 5, &a)
		e.requireLookup(p1, 0, 5, &b)
	})
}

func (s *suite) remoteLogSize(t *testing.T) {
	s.run(t, "sums_segments_carrying_epoch", func(e *env) {
		tp := e.newTP()
		e.requireSize(tp, 0, 0)
		a := e.addSegment(tp, 0, 99, epochs{0: 0, 1: 50}) // COPY_STARTED counts
		b := e.addFinished(tp, 100, 199, epochs{1: 100})
		c := e.addFinished(tp, 200, 299, epochs{1: 200, 2: 250})
		e.to(&c, rs.DeleteSegmentStarted) // DELETE_STARTED counts
		d := e.addFinished(tp, 300, 399, epochs{2: 300})
		e.to(&d, rs.DeleteSegmentStarted)
		e.to(&d, rs.DeleteSegmentFinished) // forgotten: does not count
		size := func(ss ...rs.RemoteLogSegmentMetadata) int64 {
			var n int64
			for _, s := range ss {
				n += int64(s.SegmentSizeInBytes)
			}
			return n
		}
		e.requireSize(tp, 0, size(a))
		e.requireSize(tp, 1, size(a, b, c))
		e.requireSize(tp, 2, size(c))
		e.requireSize(tp, 3, 0)
	})

	s.run(t, "large_sizes_do_not_overflow", func(e *env) {
		tp := e.newTP()
		for i := range int64(3) {
			seg := e.segment(tp, 10*i, 10*i+9, nil)
			seg.SegmentSizeInBytes = 1<<31 - 1
			e.add(seg)
		}
		e.requireSize(tp, 0, 3*(1<<31-1))
	})

	s.run(t, "unknown_partition_zero", func(e *env) {
		tp := e.newTP()
		e.addFinished(tp, 0, 9, nil)
		e.requireSize(withPartition(tp, 1), 0, 0)
		e.requireSize(e.newTP(), 0, 0)
	})
}

func (s *suite) nextSegmentWithTxnIndex(t *testing.T) {
	// addTxn adds a finished segment with the given TxnIndexEmpty.
	addTxn := func(e *env, tp rs.TopicIDPartition, start, end int64, ep epochs, hasTxn bool) rs.RemoteLogSegmentMetadata {
		e.t.Helper()
		seg := e.segment(tp, start, end, ep)
		seg.TxnIndexEmpty = !hasTxn
		e.add(seg)
		e.to(&seg, rs.CopySegmentFinished)
		return seg
	}

	s.run(t, "starting_segment_counts", func(e *env) {
		tp := e.newTP()
		a := addTxn(e, tp, 0, 99, nil, true)
		addTxn(e, tp, 100, 199, epochs{0: 100}, true)
		e.requireNextTxn(tp, 0, 0, &a)
		e.requireNextTxn(tp, 0, 99, &a)
	})

	s.run(t, "walks_contiguous_segments", func(e *env) {
		tp := e.newTP()
		addTxn(e, tp, 0, 99, nil, false)
		addTxn(e, tp, 100, 199, epochs{0: 100}, false)
		c := addTxn(e, tp, 200, 299, epochs{0: 200}, true)
		d := addTxn(e, tp, 300, 399, epochs{0: 300}, true)
		e.requireNextTxn(tp, 0, 0, &c)
		e.requireNextTxn(tp, 0, 150, &c)
		e.requireNextTxn(tp, 0, 250, &c)
		e.requireNextTxn(tp, 0, 300, &d)
		e.requireNextTxn(tp, 0, 400, nil)
	})

	s.run(t, "stops_at_gap", func(e *env) {
		tp := e.newTP()
		addTxn(e, tp, 0, 99, nil, false)
		b := addTxn(e, tp, 101, 199, epochs{0: 101}, true) // offset 100 is a gap
		e.requireNextTxn(tp, 0, 0, nil)
		e.requireNextTxn(tp, 0, 100, nil)
		e.requireNextTxn(tp, 0, 101, &b)
	})

	s.run(t, "unfinished_segment_is_a_gap", func(e *env) {
		tp := e.newTP()
		addTxn(e, tp, 0, 99, nil, false)
		mid := e.addSegment(tp, 100, 199, epochs{0: 100})
		last := addTxn(e, tp, 200, 299, epochs{0: 200}, true)
		e.requireNextTxn(tp, 0, 0, nil)
		e.to(&mid, rs.CopySegmentFinished)
		e.requireNextTxn(tp, 0, 0, &last)
		e.to(&mid, rs.DeleteSegmentStarted)
		e.requireNextTxn(tp, 0, 0, nil)
	})

	s.run(t, "walk_follows_lookups", func(e *env) {
		tp := e.newTP()
		// Ranges of epoch 0: a [0,99], b [50,300], c [60,150], d [151,400].
		// From 0: lookup(0,0) = a; lookup(0,100) = c (its range starts
		// latest), which ends at 150; lookup(0,151) = d.
		addTxn(e, tp, 0, 99, nil, false)
		b := addTxn(e, tp, 50, 300, nil, true)
		addTxn(e, tp, 60, 150, nil, false)
		d := addTxn(e, tp, 151, 400, epochs{0: 151}, true)
		e.requireNextTxn(tp, 0, 0, &d)
		e.requireNextTxn(tp, 0, 60, &d)
		e.requireNextTxn(tp, 0, 55, &b) // lookup(0,55) = b, which has an index
		e.requireNextTxn(tp, 0, 160, &d)
		e.requireNextTxn(tp, 0, 401, nil)
	})

	s.run(t, "walk_uses_the_epoch", func(e *env) {
		tp := e.newTP()
		// Epoch 1 only in [50, 99] of a; b carries epoch 1 from 100.
		addTxn(e, tp, 0, 99, epochs{0: 0, 1: 50}, false)
		b := addTxn(e, tp, 100, 199, epochs{1: 100}, true)
		e.requireNextTxn(tp, 1, 50, &b)
		e.requireNextTxn(tp, 1, 10, nil) // offset 10 is not in epoch 1's range
		e.requireNextTxn(tp, 0, 10, nil) // lookup(0, 100) misses: b does not carry epoch 0
	})

	s.run(t, "none", func(e *env) {
		tp := e.newTP()
		e.requireNextTxn(tp, 0, 0, nil)
		addTxn(e, tp, 0, 99, nil, false)
		addTxn(e, tp, 100, 199, epochs{0: 100}, false)
		e.requireNextTxn(tp, 0, 0, nil)
		e.requireNextTxn(tp, 0, 200, nil)
		e.requireNextTxn(tp, 1, 0, nil)
		e.requireNextTxn(withPartition(tp, 1), 0, 0, nil)
		e.requireNextTxn(e.newTP(), 0, 0, nil)
	})
}
