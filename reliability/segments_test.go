package reliability_test

// The partitions and segments the tests write.

import (
	"github.com/google/uuid"

	rs "github.com/krabka/remotestorage"
)

// newTP is partition partition of a new topic id named name.
func newTP(name string, partition int32) rs.TopicIDPartition {
	return rs.TopicIDPartition{TopicID: uuid.New(), Topic: name, Partition: partition}
}

// segmentOf returns a valid segment of tp numbered i: offsets [10i, 10i+9].
func segmentOf(tp rs.TopicIDPartition, i int64) rs.RemoteLogSegmentMetadata {
	return rs.RemoteLogSegmentMetadata{
		SegmentID:           rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.New()},
		StartOffset:         10 * i,
		EndOffset:           10*i + 9,
		SegmentSizeInBytes:  100,
		State:               rs.CopySegmentStarted,
		SegmentLeaderEpochs: map[rs.LeaderEpoch]int64{0: 10 * i},
		TxnIndexEmpty:       true,
	}
}
