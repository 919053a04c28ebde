package remotestorage

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"
)

// InMemoryManager is the reference implementation of RemoteLogMetadataManager:
// everything lives in memory, behind one lock. It is safe for concurrent use.
type InMemoryManager struct {
	opts options

	mu         sync.RWMutex
	partitions map[partitionKey]*memPartition
	takenIDs   map[uuid.UUID]partitionKey // every id added and not purged, and its partition

	// Purging (purge.go).
	now            func() time.Time
	forgottenAt    map[uuid.UUID]time.Time    // the segments in DELETE_SEGMENT_FINISHED, since when
	deletedAt      map[partitionKey]time.Time // the partitions in DELETE_PARTITION_FINISHED, since when
	expiry         []memForgotten             // both, in the order forgotten
	purgedSegments int64
}

var _ RemoteLogMetadataManager = (*InMemoryManager)(nil)
var _ KafkaExtensions = (*InMemoryManager)(nil)

// NewInMemoryManager returns an empty in-memory manager.
func NewInMemoryManager(opts ...Option) *InMemoryManager {
	return &InMemoryManager{
		opts:       newOptions(opts),
		partitions: make(map[partitionKey]*memPartition),
		takenIDs:   make(map[uuid.UUID]partitionKey),

		now:         time.Now,
		forgottenAt: make(map[uuid.UUID]time.Time),
		deletedAt:   make(map[partitionKey]time.Time),
	}
}

// AddRemoteLogSegmentMetadata adds a segment in COPY_SEGMENT_STARTED.
func (m *InMemoryManager) AddRemoteLogSegmentMetadata(ctx context.Context, s RemoteLogSegmentMetadata) error {
	if err := validateAdd(s, m.opts.maxCustomMetadataBytes); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.purgeExpired()
	id := s.SegmentID.ID
	if _, taken := m.takenIDs[id]; taken {
		return newError(ErrInvalidAdd, "segment %s: segment id was already added", id)
	}
	key := keyOf(s.SegmentID.TopicIDPartition)
	p := m.partitions[key]
	if p == nil {
		p = newMemPartition()
		m.partitions[key] = p
	} else if p.deleteState != partitionDeleteNone {
		return newError(ErrInvalidAdd, "segment %s: partition %s has a partition delete record (%s)", id, s.SegmentID.TopicIDPartition, p.deleteState)
	}
	p.version++
	m.takenIDs[id] = key
	seg := newMemSegment(s.clone(), p.version, 0, p.version)
	p.share(seg)
	p.segments[id] = seg
	p.changed()
	return nil
}

// UpdateRemoteLogSegmentMetadata moves a segment to u.State.
func (m *InMemoryManager) UpdateRemoteLogSegmentMetadata(ctx context.Context, u RemoteLogSegmentMetadataUpdate) error {
	if err := validateUpdate(u, m.opts.maxCustomMetadataBytes); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.purgeExpired()
	key := keyOf(u.SegmentID.TopicIDPartition)
	p := m.partitions[key]
	if p == nil || p.deleteState == DeletePartitionFinished || m.takenIDs[u.SegmentID.ID] != key {
		return newError(ErrSegmentNotFound, "segment %s in partition %s", u.SegmentID.ID, u.SegmentID.TopicIDPartition)
	}
	s := p.segments[u.SegmentID.ID]
	if s == nil {
		// Forgotten: only the id is kept, and only a retry succeeds.
		if !SegmentTransitionAllowed(DeleteSegmentFinished, u.State) {
			return segmentTransitionError(u.SegmentID.ID, DeleteSegmentFinished, u.State)
		}
		p.version++
		m.forgetSegment(u.SegmentID.ID, key) // a retry is a write: forgotten since now
		return nil
	}
	if !SegmentTransitionAllowed(s.state, u.State) {
		return segmentTransitionError(u.SegmentID.ID, s.state, u.State)
	}
	p.version++
	if u.State == CopySegmentFinished && s.finishedVersion == 0 {
		s.finishedVersion = p.version
	}
	if u.State == CopySegmentFinished {
		p.raiseEpochEnds(s)
	}
	s.state = u.State
	s.brokerID = u.BrokerID
	s.eventTimestampMs = u.EventTimestampMs
	if u.CustomMetadata != nil {
		s.customMetadata = cloneBytes(u.CustomMetadata)
	}
	s.lastVersion = p.version
	if u.State == DeleteSegmentFinished {
		// Forgotten: memory holds what is live, not history. The id stays
		// taken in takenIDs.
		delete(p.segments, u.SegmentID.ID)
		m.forgetSegment(u.SegmentID.ID, key)
	}
	p.changed()
	return nil
}

// PutRemotePartitionDeleteMetadata records a partition-delete state.
func (m *InMemoryManager) PutRemotePartitionDeleteMetadata(ctx context.Context, d RemotePartitionDeleteMetadata) error {
	if err := validatePartitionDelete(d); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.purgeExpired()
	key := keyOf(d.TopicIDPartition)
	p := m.partitions[key]
	from := partitionDeleteNone
	if p != nil {
		from = p.deleteState
	}
	if !partitionDeleteTransitionAllowed(from, d.State) {
		return partitionDeleteTransitionError(d.TopicIDPartition, from, d.State)
	}
	if p == nil {
		p = newMemPartition()
		m.partitions[key] = p
	}
	p.version++
	p.deleteState = d.State
	if d.State == DeletePartitionFinished {
		m.forgetPartition(key) // a retry is a write: deleted since now
	}
	p.changed()
	return nil
}

// RemoteLogSegmentMetadata returns the finished segment holding offset for epoch.
func (m *InMemoryManager) RemoteLogSegmentMetadata(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch, offset int64) (RemoteLogSegmentMetadata, bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if s := m.partitions[keyOf(tp)].lookup(epoch, offset); s != nil {
		return s.public(), true, nil
	}
	return RemoteLogSegmentMetadata{}, false, nil
}

// HighestOffsetForEpoch returns the largest EndOffset of the finished
// segments that carry epoch.
func (m *InMemoryManager) HighestOffsetForEpoch(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch) (int64, bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	highest, found := m.partitions[keyOf(tp)].highest(epoch)
	return highest, found, nil
}

// ListRemoteLogSegments returns every segment of tp that is not forgotten,
// ordered by StartOffset, ties by the order they were added.
func (m *InMemoryManager) ListRemoteLogSegments(ctx context.Context, tp TopicIDPartition) ([]RemoteLogSegmentMetadata, error) {
	return m.list(tp, all), nil
}

// ListRemoteLogSegmentsByEpoch is ListRemoteLogSegments restricted to the
// segments that carry epoch.
func (m *InMemoryManager) ListRemoteLogSegmentsByEpoch(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch) ([]RemoteLogSegmentMetadata, error) {
	return m.list(tp, carries(epoch)), nil
}

func (m *InMemoryManager) list(tp TopicIDPartition, keep func(*memSegment) bool) []RemoteLogSegmentMetadata {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.partitions[keyOf(tp)].list(keep)
}

// CaughtUp is always true: there is no view that could lag.
func (m *InMemoryManager) CaughtUp(ctx context.Context, tp TopicIDPartition) (bool, error) {
	return true, nil
}

// RemoteLogSize is the sum of SegmentSizeInBytes over
// ListRemoteLogSegmentsByEpoch(tp, epoch).
func (m *InMemoryManager) RemoteLogSize(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch) (int64, error) {
	segments, err := m.ListRemoteLogSegmentsByEpoch(ctx, tp, epoch)
	if err != nil {
		return 0, err
	}
	return totalSize(segments), nil
}

func totalSize(segments []RemoteLogSegmentMetadata) int64 {
	var size int64
	for _, s := range segments {
		size += int64(s.SegmentSizeInBytes)
	}
	return size
}

// NextSegmentWithTxnIndex walks the finished segments of epoch from offset as
// lookups find them and returns the first with a transaction index.
func (m *InMemoryManager) NextSegmentWithTxnIndex(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch, offset int64) (RemoteLogSegmentMetadata, bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if s := m.partitions[keyOf(tp)].nextWithTxnIndex(epoch, offset); s != nil {
		return s.public(), true, nil
	}
	return RemoteLogSegmentMetadata{}, false, nil
}

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
