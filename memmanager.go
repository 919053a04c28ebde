package remotestorage

import (
	"context"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/krabka/remotestorage/internal/partition"
)

// InMemoryManager is the reference implementation of RemoteLogMetadataManager:
// everything lives in memory, behind one lock. It is safe for concurrent use.
type InMemoryManager struct {
	opts options

	mu         sync.RWMutex
	partitions map[partitionKey]*memPartition
	takenIDs   map[uuid.UUID]partitionKey // every id added and not purged, and its partition

	// Purging (below).
	now            func() time.Time
	forgottenAt    map[uuid.UUID]time.Time    // the segments in DELETE_SEGMENT_FINISHED, since when
	deletedAt      map[partitionKey]time.Time // the partitions in DELETE_PARTITION_FINISHED, since when
	expiry         []memForgotten             // both, in the order forgotten
	purgedSegments int64
}

// memPartition is a partition of the InMemoryManager: its segments, and the
// count of its writes.
type memPartition struct {
	*partition.Partition
	version int64 // bumped by every write to the partition
}

func newMemPartition() *memPartition { return &memPartition{Partition: partition.New()} }

// partition returns the partition tp, nil when nothing was written to it.
// Callers hold m.mu.
func (m *InMemoryManager) partition(tp TopicIDPartition) *partition.Partition {
	if p := m.partitions[keyOf(tp)]; p != nil {
		return p.Partition
	}
	return nil
}

var _ RemoteLogMetadataManager = (*InMemoryManager)(nil)
var _ KafkaExtensions = (*InMemoryManager)(nil)
var _ SegmentStreams = (*InMemoryManager)(nil)
var _ PartitionDeleteStates = (*InMemoryManager)(nil)

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
	} else if state := RemotePartitionDeleteState(p.DeleteState); state != partitionDeleteNone {
		return newError(ErrInvalidAdd, "segment %s: partition %s has a partition delete record (%s)", id, s.SegmentID.TopicIDPartition, state)
	}
	p.version++
	m.takenIDs[id] = key
	p.Store(newSegment(s.clone(), p.version, 0, p.version))
	p.Changed()
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
	if p == nil || RemotePartitionDeleteState(p.DeleteState) == DeletePartitionFinished || m.takenIDs[u.SegmentID.ID] != key {
		return newError(ErrSegmentNotFound, "segment %s in partition %s", u.SegmentID.ID, u.SegmentID.TopicIDPartition)
	}
	held, ok := p.Segment(u.SegmentID.ID)
	if !ok {
		// Forgotten: only the id is kept, and only a retry succeeds.
		if !SegmentTransitionAllowed(DeleteSegmentFinished, u.State) {
			return segmentTransitionError(u.SegmentID.ID, DeleteSegmentFinished, u.State)
		}
		p.version++
		m.forgetSegment(u.SegmentID.ID, key) // a retry is a write: forgotten since now
		return nil
	}
	if from := RemoteLogSegmentState(held.State()); !SegmentTransitionAllowed(from, u.State) {
		return segmentTransitionError(u.SegmentID.ID, from, u.State)
	}
	s := held.Segment()
	p.version++
	if u.State == CopySegmentFinished && s.FinishedVersion == 0 {
		s.FinishedVersion = p.version
	}
	if u.State == CopySegmentFinished {
		p.RaiseEpochEnds(&s)
	}
	s.State = int8(u.State)
	s.BrokerID = u.BrokerID
	s.EventTimestampMs = u.EventTimestampMs
	if u.CustomMetadata != nil {
		s.CustomMetadata = cloneBytes(u.CustomMetadata)
	}
	s.LastVersion = p.version
	if u.State == DeleteSegmentFinished {
		// Forgotten: memory holds what is live, not history. The id stays
		// taken in takenIDs.
		p.Remove(u.SegmentID.ID)
		m.forgetSegment(u.SegmentID.ID, key)
	} else {
		p.Store(&s)
	}
	p.Changed()
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
		from = RemotePartitionDeleteState(p.DeleteState)
	}
	if !partitionDeleteTransitionAllowed(from, d.State) {
		return partitionDeleteTransitionError(d.TopicIDPartition, from, d.State)
	}
	if p == nil {
		p = newMemPartition()
		m.partitions[key] = p
	}
	p.version++
	p.DeleteState = int8(d.State)
	if d.State == DeletePartitionFinished {
		m.forgetPartition(key) // a retry is a write: deleted since now
	}
	p.Changed()
	return nil
}

// RemoteLogSegmentMetadata returns the finished segment holding offset for epoch.
func (m *InMemoryManager) RemoteLogSegmentMetadata(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch, offset int64) (RemoteLogSegmentMetadata, bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if r, ok := m.partition(tp).Lookup(int32(epoch), offset); ok {
		return publicSegment(r), true, nil
	}
	return RemoteLogSegmentMetadata{}, false, nil
}

// HighestOffsetForEpoch returns the largest EndOffset of the finished
// segments that carry epoch.
func (m *InMemoryManager) HighestOffsetForEpoch(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch) (int64, bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	highest, found := m.partition(tp).Highest(int32(epoch))
	return highest, found, nil
}

// ListRemoteLogSegments returns every segment of tp that is not forgotten,
// ordered by StartOffset, ties by the order they were added.
func (m *InMemoryManager) ListRemoteLogSegments(ctx context.Context, tp TopicIDPartition) ([]RemoteLogSegmentMetadata, error) {
	return m.list(tp, partition.All), nil
}

// ListRemoteLogSegmentsByEpoch is ListRemoteLogSegments restricted to the
// segments that carry epoch.
func (m *InMemoryManager) ListRemoteLogSegmentsByEpoch(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch) ([]RemoteLogSegmentMetadata, error) {
	return m.list(tp, carries(epoch)), nil
}

func (m *InMemoryManager) list(tp TopicIDPartition, keep func(partition.Ref) bool) []RemoteLogSegmentMetadata {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return publicSegments(m.partition(tp).List(keep))
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

// NextSegmentWithTxnIndex walks the finished segments of epoch from offset as
// lookups find them and returns the first with a transaction index.
func (m *InMemoryManager) NextSegmentWithTxnIndex(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch, offset int64) (RemoteLogSegmentMetadata, bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if r, ok := m.partition(tp).NextWithTxnIndex(int32(epoch), offset); ok {
		return publicSegment(r), true, nil
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
	p := m.partition(tp)
	if p == nil {
		return RemoteLogSegmentMetadata{}, false, nil
	}
	if r, ok := p.FirstForTimestamp(int32(epoch), timestampMs, startingOffset); ok {
		return publicSegment(r), true, nil
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
	end, ok := m.partition(tp).EpochEnd(int32(epoch))
	return end, ok, nil
}

// RemoteLogSegments streams ListRemoteLogSegments(ctx, tp), a page of
// listPageSize segments per read lock. See SegmentStreams.
func (m *InMemoryManager) RemoteLogSegments(ctx context.Context, tp TopicIDPartition) iter.Seq2[RemoteLogSegmentMetadata, error] {
	return m.remoteLogSegments(ctx, tp, listPageSize)
}

func (m *InMemoryManager) remoteLogSegments(ctx context.Context, tp TopicIDPartition, pageSize int) iter.Seq2[RemoteLogSegmentMetadata, error] {
	return m.stream(ctx, tp, pageSize, partition.All,
		func(err error) error { return fmt.Errorf("remotestorage: list segments of %s: %w", tp, err) })
}

// RemoteLogSegmentsByEpoch streams ListRemoteLogSegmentsByEpoch(ctx, tp,
// epoch), a page of listPageSize segments per read lock. See SegmentStreams.
func (m *InMemoryManager) RemoteLogSegmentsByEpoch(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch) iter.Seq2[RemoteLogSegmentMetadata, error] {
	return m.remoteLogSegmentsByEpoch(ctx, tp, epoch, listPageSize)
}

func (m *InMemoryManager) remoteLogSegmentsByEpoch(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch, pageSize int) iter.Seq2[RemoteLogSegmentMetadata, error] {
	return m.stream(ctx, tp, pageSize, carries(epoch), func(err error) error {
		return fmt.Errorf("remotestorage: list segments of epoch %d in %s: %w", epoch, tp, err)
	})
}

// stream pages through the listed segments of tp that keep accepts. The lock
// is held only while a page is copied, never while the caller's loop body
// runs, so the body may call the manager.
func (m *InMemoryManager) stream(ctx context.Context, tp TopicIDPartition, pageSize int, keep func(partition.Ref) bool, ctxErr func(error) error) iter.Seq2[RemoteLogSegmentMetadata, error] {
	fetch := func(_ context.Context, after listKey, limit int) ([]listItem, error) {
		m.mu.RLock()
		defer m.mu.RUnlock()
		return pageOf(m.partition(tp), after, limit, keep), nil
	}
	return streamPages(ctx, pageSize, fetch, ctxErr)
}

// PartitionDeleteState implements PartitionDeleteStates.
func (m *InMemoryManager) PartitionDeleteState(ctx context.Context, tp TopicIDPartition) (RemotePartitionDeleteState, bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p := m.partition(tp)
	if p == nil || RemotePartitionDeleteState(p.DeleteState) == partitionDeleteNone {
		return partitionDeleteNone, false, nil
	}
	return RemotePartitionDeleteState(p.DeleteState), true, nil
}

// InMemoryManager's purge (purge.go says what is purged, and when). It has
// no background goroutine (it has no Close): each write first purges, a
// bounded batch at a time, what its retention has expired, oldest first,
// from a queue of what was forgotten when.

// memForgotten is one entry of the InMemoryManager's queue: a segment that
// reached DELETE_SEGMENT_FINISHED, or a partition whose delete finished, at
// a time. An entry is stale once a later write (a retry) re-stamped it.
type memForgotten struct {
	id  uuid.UUID // the segment; uuid.Nil: the partition key
	key partitionKey
	at  time.Time
}

// forgetSegment records that segment id of key was forgotten now. Callers
// hold m.mu.
func (m *InMemoryManager) forgetSegment(id uuid.UUID, key partitionKey) {
	at := m.now()
	m.forgottenAt[id] = at
	if m.opts.retention() > 0 {
		m.expiry = append(m.expiry, memForgotten{id: id, key: key, at: at})
	}
}

// forgetPartition records that the delete of partition key finished now.
// Callers hold m.mu.
func (m *InMemoryManager) forgetPartition(key partitionKey) {
	at := m.now()
	m.deletedAt[key] = at
	if m.opts.retention() > 0 {
		m.expiry = append(m.expiry, memForgotten{key: key, at: at})
	}
}

// purgeExpired purges, before a write, up to a batch of what the retention
// has expired. Callers hold m.mu.
func (m *InMemoryManager) purgeExpired() {
	retention := m.opts.retention()
	if retention <= 0 {
		return
	}
	cutoff := m.now().Add(-retention)
	for n := int32(0); n < m.opts.batchSize() && len(m.expiry) > 0 && !m.expiry[0].at.After(cutoff); n++ {
		e := m.expiry[0]
		m.expiry[0] = memForgotten{}
		m.expiry = m.expiry[1:]
		if e.id == uuid.Nil {
			if at, ok := m.deletedAt[e.key]; ok && at.Equal(e.at) {
				m.purgePartition(e.key)
			}
		} else if at, ok := m.forgottenAt[e.id]; ok && at.Equal(e.at) {
			m.purgeSegment(e.id)
		}
	}
	if len(m.expiry) == 0 {
		m.expiry = nil // let the backing array go
	}
}

// purgeSegment frees the id of a forgotten segment. Callers hold m.mu.
func (m *InMemoryManager) purgeSegment(id uuid.UUID) {
	delete(m.takenIDs, id)
	delete(m.forgottenAt, id)
	m.purgedSegments++
}

// purgePartition frees the ids of every segment of a partition whose delete
// finished, and takes its delete record. Callers hold m.mu.
func (m *InMemoryManager) purgePartition(key partitionKey) int64 {
	var n int64
	for id, k := range m.takenIDs {
		if k == key {
			m.purgeSegment(id)
			n++
		}
	}
	delete(m.deletedAt, key)
	if p := m.partitions[key]; p != nil {
		p.version++
		p.DeleteState = int8(partitionDeleteNone)
		p.Empty()
		p.Changed()
	}
	return n
}

// PurgeForgotten deletes every segment forgotten for at least olderThan
// (its id may then be added again), and takes the delete record of each
// partition in DELETE_PARTITION_FINISHED for that long. Returns the number
// of segments deleted. A negative olderThan is an error.
func (m *InMemoryManager) PurgeForgotten(ctx context.Context, olderThan time.Duration) (int64, error) {
	if olderThan < 0 {
		return 0, negativeAge(olderThan)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cutoff := m.now().Add(-olderThan)
	var n int64
	for key, at := range m.deletedAt {
		if !at.After(cutoff) {
			n += m.purgePartition(key)
		}
	}
	for id, at := range m.forgottenAt {
		if !at.After(cutoff) {
			m.purgeSegment(id)
			n++
		}
	}
	return n, nil
}

// PurgedSegments is how many segments this manager has purged.
func (m *InMemoryManager) PurgedSegments() int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.purgedSegments
}
