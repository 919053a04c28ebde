package rlmmtest

import (
	"context"

	rs "github.com/krabka/remotestorage"
)

// FirstSegmentForTimestamp is, in list order, the first finished segment
// carrying e whose MaxTimestampMs >= ts and EndOffset >= startingOffset.
func (m *Model) FirstSegmentForTimestamp(_ context.Context, tp rs.TopicIDPartition, e rs.LeaderEpoch, ts, startingOffset int64) (rs.RemoteLogSegmentMetadata, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.visible(tp) {
		if _, ok := s.md.SegmentLeaderEpochs[e]; !ok || s.md.State != rs.CopySegmentFinished {
			continue
		}
		if s.md.MaxTimestampMs >= ts && s.md.EndOffset >= startingOffset {
			return cloneSegment(s.md), true, nil
		}
	}
	return rs.RemoteLogSegmentMetadata{}, false, nil
}

// EpochEndOffset is the largest offset of e's range over every segment of tp
// that ever reached COPY_SEGMENT_FINISHED, forgotten since or not; none once
// the partition's delete finished.
func (m *Model) EpochEndOffset(_ context.Context, tp rs.TopicIDPartition, e rs.LeaderEpoch) (int64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.parts[keyOf(tp)]
	if p == nil || p.hasDelete && p.deleteState == rs.DeletePartitionFinished {
		return 0, false, nil
	}
	var end int64
	found := false
	for _, s := range p.segs {
		if s.finishSeq == 0 {
			continue // never reached COPY_SEGMENT_FINISHED
		}
		if _, last, ok := epochRange(s.md, e); ok && (!found || last > end) {
			end, found = last, true
		}
	}
	return end, found, nil
}
