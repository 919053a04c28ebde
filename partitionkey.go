package remotestorage

import "github.com/google/uuid"

// partitionKey is the identity of a partition: (TopicID, Partition). The
// topic name is not part of it.
type partitionKey struct {
	topicID   uuid.UUID
	partition int32
}

func keyOf(tp TopicIDPartition) partitionKey {
	return partitionKey{topicID: tp.TopicID, partition: tp.Partition}
}
