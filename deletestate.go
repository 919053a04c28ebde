package remotestorage

import (
	"context"

	"github.com/krabka/remotestorage/db"
	"github.com/krabka/remotestorage/internal/dbuuid"
	"github.com/krabka/remotestorage/internal/partition"
)

// PartitionDeleteStates reports a partition's partition-delete record.
// Both managers implement it. A caller that must tell a deleted partition
// from one that holds nothing (rlmmd does, for Kafka's plugin) asks it after
// a query answered none: at DELETE_PARTITION_FINISHED every segment is
// forgotten, so a query that found something needs no second look.
type PartitionDeleteStates interface {
	// PartitionDeleteState returns tp's partition-delete state, and false
	// when tp has no partition-delete record. It fails only on store
	// failure (and with ErrNotReady while a cache loads tp).
	PartitionDeleteState(ctx context.Context, tp TopicIDPartition) (RemotePartitionDeleteState, bool, error)
}

var (
	_ PartitionDeleteStates = (*PgManager)(nil)
	_ PartitionDeleteStates = (*InMemoryManager)(nil)
)

// PartitionDeleteState implements PartitionDeleteStates: from the cache when
// the manager caches tp (no round trip), else one primary-key read of the
// partition's row on the reader pool.
func (m *PgManager) PartitionDeleteState(ctx context.Context, tp TopicIDPartition) (RemotePartitionDeleteState, bool, error) {
	state := partitionDeleteNone
	if served, err := m.fromCache(tp, func(p *partition.Partition) {
		if p != nil {
			state = RemotePartitionDeleteState(p.DeleteState)
		}
	}); served {
		return state, err == nil && state != partitionDeleteNone, err
	}
	row, found, err := readOptional(ctx, m, func(ctx context.Context, tx db.DBTX) (db.RlmmPartition, error) {
		return m.queries.PartitionGet(ctx, tx, db.PartitionGetParams{TopicID: dbuuid.UUID(tp.TopicID), Partition: tp.Partition})
	}, "read the partition-delete state of %s", tp)
	if err != nil || !found || !row.DeleteState.Valid {
		return partitionDeleteNone, false, err
	}
	return RemotePartitionDeleteState(row.DeleteState.Int16), true, nil
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
