package partition

import "github.com/google/uuid"

// TopicIDPartition has the fields of remotestorage.TopicIDPartition, which
// converts to and from it.
type TopicIDPartition struct {
	TopicID   uuid.UUID
	Topic     string
	Partition int32
}

// Key is the identity of a partition: (TopicID, Partition). The topic name
// is not part of it.
type Key struct {
	TopicID   uuid.UUID
	Partition int32
}

// KeyOf returns tp's identity.
func KeyOf(tp TopicIDPartition) Key {
	return Key{TopicID: tp.TopicID, Partition: tp.Partition}
}
