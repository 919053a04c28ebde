package rlmmtest

import (
	"bytes"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
)

func (s *suite) update(t *testing.T) {
	s.run(t, "unknown_id", func(e *env) {
		tp := e.newTP()
		seg := e.addSegment(tp, 0, 9, nil)
		u := e.updateFor(seg, rs.CopySegmentFinished)
		u.SegmentID.ID = uuid.New()
		err := e.m.UpdateRemoteLogSegmentMetadata(e.ctx, u)
		requireSentinel(e.t, err, rs.ErrSegmentNotFound)
		require.Contains(e.t, err.Error(), u.SegmentID.ID.String(), "the error names the segment")
		e.requireSegmentsAsStored(tp, seg)
	})

	s.run(t, "unknown_partition", func(e *env) {
		u := e.updateFor(e.segment(e.newTP(), 0, 9, nil), rs.DeleteSegmentStarted)
		requireSentinel(e.t, e.m.UpdateRemoteLogSegmentMetadata(e.ctx, u), rs.ErrSegmentNotFound)
		e.requireList(u.SegmentID.TopicIDPartition)
	})

	s.run(t, "id_added_under_other_partition", func(e *env) {
		tp := e.newTP()
		seg := e.addSegment(tp, 0, 9, nil)
		for _, other := range []rs.TopicIDPartition{withPartition(tp, 1), e.newTP(), {TopicID: uuid.New(), Topic: tp.Topic, Partition: 0}} {
			u := e.updateFor(seg, rs.CopySegmentFinished)
			u.SegmentID.TopicIDPartition = other
			requireSentinel(e.t, e.m.UpdateRemoteLogSegmentMetadata(e.ctx, u), rs.ErrSegmentNotFound, "update of %s under %s", seg.SegmentID.ID, other)
			e.requireList(other)
		}
		e.requireSegmentsAsStored(tp, seg)
	})

	s.run(t, "partition_deleted", func(e *env) {
		tp := e.newTP()
		finished := e.addFinished(tp, 0, 9, nil)
		started := e.addSegment(tp, 10, 19, nil)
		deleting := e.addFinished(tp, 20, 29, nil)
		e.to(&deleting, rs.DeleteSegmentStarted)
		e.mustPutDelete(tp, rs.DeletePartitionMarked, rs.DeletePartitionStarted, rs.DeletePartitionFinished)
		for _, seg := range []rs.RemoteLogSegmentMetadata{finished, started, deleting} {
			for _, to := range []rs.RemoteLogSegmentState{rs.CopySegmentFinished, rs.DeleteSegmentStarted, rs.DeleteSegmentFinished} {
				requireSentinel(e.t, e.m.UpdateRemoteLogSegmentMetadata(e.ctx, e.updateFor(seg, to)), rs.ErrSegmentNotFound,
					"update of %s (%s) to %s after the partition was deleted", seg.SegmentID.ID, seg.State, to)
			}
		}
		e.requireList(tp)
	})

	s.run(t, "custom_metadata_over_limit", func(e *env) {
		tp := e.newTP()
		started := e.addSegment(tp, 0, 9, nil)
		finished := e.addFinished(tp, 10, 19, nil)
		over := bytes.Repeat([]byte{'o'}, CustomMetadataLimit+1)
		for _, c := range []struct {
			seg rs.RemoteLogSegmentMetadata
			to  rs.RemoteLogSegmentState
		}{
			{started, rs.CopySegmentFinished},
			{started, rs.DeleteSegmentStarted},
			{finished, rs.CopySegmentFinished},
			{finished, rs.DeleteSegmentStarted},
		} {
			u := e.updateFor(c.seg, c.to)
			u.CustomMetadata = over
			requireSentinel(e.t, e.m.UpdateRemoteLogSegmentMetadata(e.ctx, u), rs.ErrInvalidSegmentTransition,
				"update of %s (%s) to %s with %d bytes of custom metadata", c.seg.SegmentID.ID, c.seg.State, c.to, len(over))
			e.requireSegmentsAsStored(tp, started, finished)
		}
		// Exactly at the limit is fine.
		u := e.updateFor(started, rs.CopySegmentFinished)
		u.CustomMetadata = bytes.Repeat([]byte{'a'}, CustomMetadataLimit)
		require.NoError(e.t, e.m.UpdateRemoteLogSegmentMetadata(e.ctx, u))
		started = applyUpdate(started, u)
		e.requireSegmentsAsStored(tp, started, finished)
	})

	s.run(t, "custom_metadata_nil_keeps_non_nil_replaces", func(e *env) {
		tp := e.newTP()
		seg := e.addSegment(tp, 0, 9, nil)
		orig := append([]byte{}, seg.CustomMetadata...)
		e.to(&seg, rs.CopySegmentFinished) // nil: kept
		require.Equal(e.t, orig, e.list(tp)[0].CustomMetadata)
		u := e.updateFor(seg, rs.CopySegmentFinished)
		u.CustomMetadata = []byte{0, 1, 2}
		require.NoError(e.t, e.m.UpdateRemoteLogSegmentMetadata(e.ctx, u))
		seg = applyUpdate(seg, u)
		require.Equal(e.t, []byte{0, 1, 2}, e.list(tp)[0].CustomMetadata)
		u = e.updateFor(seg, rs.DeleteSegmentStarted)
		u.CustomMetadata = []byte{} // non-nil: replaces, with nothing
		require.NoError(e.t, e.m.UpdateRemoteLogSegmentMetadata(e.ctx, u))
		seg = applyUpdate(seg, u)
		require.Empty(e.t, e.list(tp)[0].CustomMetadata)
		e.requireSegmentsAsStored(tp, seg)
	})

	s.run(t, "success_takes_state_broker_timestamp", func(e *env) {
		tp := e.newTP()
		seg := e.addSegment(tp, 0, 9, nil)
		u := rs.RemoteLogSegmentMetadataUpdate{SegmentID: seg.SegmentID, EventTimestampMs: 424242, State: rs.CopySegmentFinished, BrokerID: 77}
		require.NoError(e.t, e.m.UpdateRemoteLogSegmentMetadata(e.ctx, u))
		got := e.list(tp)[0]
		require.Equal(e.t, rs.CopySegmentFinished, got.State)
		require.Equal(e.t, int32(77), got.BrokerID)
		require.Equal(e.t, int64(424242), got.EventTimestampMs)
		// Everything else is as added.
		requireSameSegment(e.t, applyUpdate(seg, u), got)
	})
}
