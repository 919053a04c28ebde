package remotestorage

import "context"

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
