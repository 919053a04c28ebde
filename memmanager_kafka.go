package remotestorage

import "context"

// FirstSegmentForTimestamp returns the first COPY_SEGMENT_FINISHED segment
// carrying epoch, in the order of ListRemoteLogSegmentsByEpoch, whose
// MaxTimestampMs >= timestampMs and EndOffset >= startingOffset. None:
// (zero, false, nil).
func (m *InMemoryManager) FirstSegmentForTimestamp(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch, timestampMs, startingOffset int64) (RemoteLogSegmentMetadata, bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p := m.partitions[keyOf(tp)]
	if p == nil {
		return RemoteLogSegmentMetadata{}, false, nil
	}
	if s := p.firstForTimestamp(epoch, timestampMs, startingOffset); s != nil {
		return s.public(), true, nil
	}
	return RemoteLogSegmentMetadata{}, false, nil
}

// EpochEndOffset returns Kafka's highest offset for epoch: the largest offset
// in the range of epoch of a segment that reached COPY_SEGMENT_FINISHED.
// Deletes never lower it; DELETE_PARTITION_FINISHED forgets it. None:
// (0, false, nil).
func (m *InMemoryManager) EpochEndOffset(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch) (int64, bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	end, ok := m.partitions[keyOf(tp)].epochEnd(epoch)
	return end, ok, nil
}
