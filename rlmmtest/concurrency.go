package rlmmtest

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
)

const racers = 8

// race runs f(0) … f(n-1) in goroutines released at once and returns their
// errors by index.
func race(n int, f func(i int) error) []error {
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = f(i)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// raceUpdates sends updates[i] concurrently and returns their errors.
func (e *env) raceUpdates(updates []rs.RemoteLogSegmentMetadataUpdate) []error {
	return race(len(updates), func(i int) error { return e.m.UpdateRemoteLogSegmentMetadata(e.ctx, updates[i]) })
}

// requireStoredFrom checks that seg is listed with state want and with the
// BrokerID and EventTimestampMs of one of the updates in from (never a mix
// of two).
func (e *env) requireStoredFrom(seg rs.RemoteLogSegmentMetadata, want rs.RemoteLogSegmentState, from []rs.RemoteLogSegmentMetadataUpdate) {
	e.t.Helper()
	list := e.list(seg.SegmentID.TopicIDPartition)
	require.Len(e.t, list, 1)
	got := list[0]
	require.Equal(e.t, want, got.State)
	for _, u := range from {
		if u.BrokerID == got.BrokerID && u.EventTimestampMs == got.EventTimestampMs {
			requireSameSegment(e.t, applyUpdate(seg, u), got)
			return
		}
	}
	e.t.Fatalf("stored BrokerID %d / EventTimestampMs %d come from none of the successful %s updates", got.BrokerID, got.EventTimestampMs, want)
}

func (s *suite) concurrency(t *testing.T) {
	for _, c := range []struct {
		from, to rs.RemoteLogSegmentState
	}{
		{rs.CopySegmentStarted, rs.CopySegmentFinished},
		{rs.CopySegmentFinished, rs.CopySegmentFinished},
		{rs.CopySegmentFinished, rs.DeleteSegmentStarted},
		{rs.DeleteSegmentStarted, rs.DeleteSegmentFinished},
	} {
		s.run(t, "same_update_"+stateName(c.from)+"_to_"+stateName(c.to), func(e *env) {
			tp := e.newTP()
			seg := e.addSegment(tp, 0, 9, nil)
			e.reach(&seg, c.from)
			var updates []rs.RemoteLogSegmentMetadataUpdate
			for range racers {
				updates = append(updates, e.updateFor(seg, c.to))
			}
			for i, err := range e.raceUpdates(updates) {
				require.NoError(e.t, err, "racer %d: the first applied makes the transition, the others retry it", i)
			}
			if c.to == rs.DeleteSegmentFinished {
				e.requireList(tp)
				requireSentinel(e.t, e.m.UpdateRemoteLogSegmentMetadata(e.ctx, e.updateFor(seg, rs.DeleteSegmentStarted)), rs.ErrInvalidSegmentTransition)
				return
			}
			e.requireStoredFrom(seg, c.to, updates)
		})
	}

	s.run(t, "COPY_SEGMENT_FINISHED_vs_DELETE_SEGMENT_STARTED", func(e *env) {
		tp := e.newTP()
		seg := e.addSegment(tp, 0, 9, nil)
		var updates []rs.RemoteLogSegmentMetadataUpdate
		for i := range racers {
			updates = append(updates, e.updateFor(seg, []rs.RemoteLogSegmentState{rs.CopySegmentFinished, rs.DeleteSegmentStarted}[i%2]))
		}
		var deletes []rs.RemoteLogSegmentMetadataUpdate
		for i, err := range e.raceUpdates(updates) {
			if updates[i].State == rs.DeleteSegmentStarted {
				// DELETE_SEGMENT_STARTED is allowed from every state it can meet.
				require.NoError(e.t, err, "racer %d (DELETE_SEGMENT_STARTED)", i)
				deletes = append(deletes, updates[i])
			} else if err != nil {
				// Applied after a DELETE_SEGMENT_STARTED.
				requireSentinel(e.t, err, rs.ErrInvalidSegmentTransition, "racer %d (COPY_SEGMENT_FINISHED)", i)
			}
		}
		// The last applied success is a DELETE_SEGMENT_STARTED: a
		// COPY_SEGMENT_FINISHED after one fails.
		e.requireStoredFrom(seg, rs.DeleteSegmentStarted, deletes)
		e.requireLookup(tp, 0, 0, nil)
	})

	s.run(t, "DELETE_SEGMENT_STARTED_vs_DELETE_SEGMENT_FINISHED", func(e *env) {
		tp := e.newTP()
		seg := e.addFinished(tp, 0, 9, nil)
		var updates []rs.RemoteLogSegmentMetadataUpdate
		for i := range racers {
			updates = append(updates, e.updateFor(seg, []rs.RemoteLogSegmentState{rs.DeleteSegmentStarted, rs.DeleteSegmentFinished}[i%2]))
		}
		var startedOK []rs.RemoteLogSegmentMetadataUpdate
		finishedOK := 0
		for i, err := range e.raceUpdates(updates) {
			if err != nil {
				// DELETE_SEGMENT_FINISHED before any DELETE_SEGMENT_STARTED, or
				// DELETE_SEGMENT_STARTED after a DELETE_SEGMENT_FINISHED.
				requireSentinel(e.t, err, rs.ErrInvalidSegmentTransition, "racer %d (%s)", i, updates[i].State)
				continue
			}
			if updates[i].State == rs.DeleteSegmentStarted {
				startedOK = append(startedOK, updates[i])
			} else {
				finishedOK++
			}
		}
		require.NotEmpty(e.t, startedOK, "the first applied success can only be a DELETE_SEGMENT_STARTED (COPY_SEGMENT_FINISHED -> DELETE_SEGMENT_FINISHED is refused)")
		if finishedOK > 0 {
			e.requireList(tp) // nothing leaves DELETE_SEGMENT_FINISHED
		} else {
			e.requireStoredFrom(seg, rs.DeleteSegmentStarted, startedOK)
		}
	})

	s.run(t, "add_same_id", func(e *env) {
		tp := e.newTP()
		base := e.segment(tp, 0, 9, nil)
		var segs []rs.RemoteLogSegmentMetadata
		for i := range racers {
			seg := cloneSegment(base)
			seg.SegmentID.TopicIDPartition = withPartition(tp, int32(i%3))
			seg.BrokerID = int32(i)
			segs = append(segs, seg)
		}
		errs := race(racers, func(i int) error { return e.m.AddRemoteLogSegmentMetadata(e.ctx, segs[i]) })
		winner := -1
		for i, err := range errs {
			if err == nil {
				require.Equal(e.t, -1, winner, "two adds of one id succeeded (racers %d and %d)", winner, i)
				winner = i
				continue
			}
			requireSentinel(e.t, err, rs.ErrInvalidAdd, "racer %d", i)
		}
		require.NotEqual(e.t, -1, winner, "one add of the id succeeds")
		for p := range int32(3) {
			ptp := withPartition(tp, p)
			if segs[winner].SegmentID.TopicIDPartition == ptp {
				e.requireList(ptp, segs[winner])
			} else {
				e.requireList(ptp)
			}
		}
	})

	s.run(t, "partition_delete_MARKED_vs_STARTED", func(e *env) {
		tp := e.newTP()
		seg := e.addFinished(tp, 0, 9, nil)
		states := make([]rs.RemotePartitionDeleteState, racers)
		for i := range states {
			states[i] = []rs.RemotePartitionDeleteState{rs.DeletePartitionMarked, rs.DeletePartitionStarted}[i%2]
		}
		errs := race(racers, func(i int) error { return e.putDelete(tp, states[i]) })
		startedOK := false
		for i, err := range errs {
			if err != nil {
				requireSentinel(e.t, err, rs.ErrInvalidPartitionDeleteTransition, "racer %d (%s)", i, states[i])
			} else if states[i] == rs.DeletePartitionStarted {
				startedOK = true
			}
		}
		want := rs.DeletePartitionMarked
		if startedOK {
			want = rs.DeletePartitionStarted
		}
		e.requirePartitionDeleteState(tp, want, true, seg)
	})

	s.run(t, "independent_partitions", func(e *env) {
		topic := e.newTP()
		const perPartition = 12
		segs := make([][]rs.RemoteLogSegmentMetadata, racers)
		errs := race(racers, func(p int) error {
			tp := withPartition(topic, int32(p))
			for i := range int64(perPartition) {
				seg := e.segment(tp, 10*i, 10*i+9, nil)
				if err := e.m.AddRemoteLogSegmentMetadata(e.ctx, seg); err != nil {
					return err
				}
				for _, st := range []rs.RemoteLogSegmentState{rs.CopySegmentFinished, rs.DeleteSegmentStarted}[:1+i%2] {
					u := e.updateFor(seg, st)
					if err := e.m.UpdateRemoteLogSegmentMetadata(e.ctx, u); err != nil {
						return err
					}
					seg = applyUpdate(seg, u)
				}
				segs[p] = append(segs[p], seg)
			}
			return nil
		})
		require.NoError(e.t, errors.Join(errs...))
		for p := range racers {
			e.requireSegmentsAsStored(withPartition(topic, int32(p)), segs[p]...)
		}
	})
}
