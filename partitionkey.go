package remotestorage

import "github.com/krabka/remotestorage/internal/partition"

// partitionKey is the identity of a partition: (TopicID, Partition). The
// topic name is not part of it.
type partitionKey = partition.Key

func keyOf(tp TopicIDPartition) partitionKey {
	return partition.KeyOf(partition.TopicIDPartition(tp))
}
