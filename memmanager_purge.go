package remotestorage

import (
	"context"
	"time"

	"github.com/google/uuid"
)

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
