package rlmmtest

import (
	"testing"

	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
)

func (s *suite) identity(t *testing.T) {
	s.run(t, "topic_name_not_part_of_identity", func(e *env) {
		// API.md: identity is (TopicID, Partition); Topic is kept for DBAs.
		tp := e.newTP()
		seg := e.addSegment(tp, 0, 99, nil)
		renamed := tp
		renamed.Topic = tp.Topic + "-renamed"
		listed := e.list(renamed)
		require.Len(e.t, listed, 1, "list naming the partition by another topic name")
		require.Equal(e.t, seg.SegmentID.ID, listed[0].SegmentID.ID)
		u := e.updateFor(seg, rs.CopySegmentFinished)
		u.SegmentID.TopicIDPartition = renamed
		require.NoError(e.t, e.m.UpdateRemoteLogSegmentMetadata(e.ctx, u), "update naming the partition by another topic name")
		got, ok, err := e.m.RemoteLogSegmentMetadata(e.ctx, renamed, 0, 50)
		require.NoError(e.t, err)
		require.True(e.t, ok)
		require.Equal(e.t, seg.SegmentID.ID, got.SegmentID.ID)
		e.requireHighest(renamed, 0, 99, true)
		// The same id under the new name is the same id.
		again := cloneSegment(seg)
		again.SegmentID.TopicIDPartition = renamed
		requireSentinel(e.t, e.m.AddRemoteLogSegmentMetadata(e.ctx, again), rs.ErrInvalidAdd)
		// A partition delete under another name deletes the partition.
		e.mustPutDelete(renamed, rs.DeletePartitionMarked)
		requireSentinel(e.t, e.m.AddRemoteLogSegmentMetadata(e.ctx, e.segment(tp, 100, 199, nil)), rs.ErrInvalidAdd)
	})
}
