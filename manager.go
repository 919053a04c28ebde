package remotestorage

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/google/uuid"
)

// LeaderEpoch is a Kafka leader epoch.
type LeaderEpoch int32

// TopicIDPartition identifies a partition. Identity is (TopicID, Partition);
// Topic is the human-readable name, kept for DBAs.
type TopicIDPartition struct {
	TopicID   uuid.UUID
	Topic     string
	Partition int32
}

func (tp TopicIDPartition) String() string {
	return fmt.Sprintf("%s-%d (%s)", tp.Topic, tp.Partition, tp.TopicID)
}

// RemoteLogSegmentID identifies a segment in remote storage.
type RemoteLogSegmentID struct {
	TopicIDPartition TopicIDPartition
	ID               uuid.UUID // globally unique
}

// RemoteLogSegmentState is the lifecycle state of a remote log segment.
type RemoteLogSegmentState int8

const (
	CopySegmentStarted    RemoteLogSegmentState = 0
	CopySegmentFinished   RemoteLogSegmentState = 1
	DeleteSegmentStarted  RemoteLogSegmentState = 2
	DeleteSegmentFinished RemoteLogSegmentState = 3
)

var segmentStateNames = [...]string{
	CopySegmentStarted:    "COPY_SEGMENT_STARTED",
	CopySegmentFinished:   "COPY_SEGMENT_FINISHED",
	DeleteSegmentStarted:  "DELETE_SEGMENT_STARTED",
	DeleteSegmentFinished: "DELETE_SEGMENT_FINISHED",
}

// Valid reports whether s is one of the four segment states.
func (s RemoteLogSegmentState) Valid() bool {
	return s >= 0 && int(s) < len(segmentStateNames)
}

func (s RemoteLogSegmentState) String() string {
	if !s.Valid() {
		return fmt.Sprintf("RemoteLogSegmentState(%d)", int8(s))
	}
	return segmentStateNames[s]
}

// RemotePartitionDeleteState is the state of a partition's deletion.
type RemotePartitionDeleteState int8

const (
	DeletePartitionMarked   RemotePartitionDeleteState = 0
	DeletePartitionStarted  RemotePartitionDeleteState = 1
	DeletePartitionFinished RemotePartitionDeleteState = 2
)

// partitionDeleteNone is the partition-delete "state" of a partition that has
// no delete record yet. It is never stored.
const partitionDeleteNone RemotePartitionDeleteState = -1

var partitionDeleteStateNames = [...]string{
	DeletePartitionMarked:   "DELETE_PARTITION_MARKED",
	DeletePartitionStarted:  "DELETE_PARTITION_STARTED",
	DeletePartitionFinished: "DELETE_PARTITION_FINISHED",
}

// Valid reports whether s is one of the three partition-delete states.
func (s RemotePartitionDeleteState) Valid() bool {
	return s >= 0 && int(s) < len(partitionDeleteStateNames)
}

func (s RemotePartitionDeleteState) String() string {
	if s == partitionDeleteNone {
		return "NONE"
	}
	if !s.Valid() {
		return fmt.Sprintf("RemotePartitionDeleteState(%d)", int8(s))
	}
	return partitionDeleteStateNames[s]
}

// RemoteLogSegmentMetadata describes one segment in remote storage.
type RemoteLogSegmentMetadata struct {
	SegmentID          RemoteLogSegmentID
	StartOffset        int64
	EndOffset          int64 // inclusive
	MaxTimestampMs     int64
	BrokerID           int32
	EventTimestampMs   int64
	SegmentSizeInBytes int32
	CustomMetadata     []byte // nil: none
	State              RemoteLogSegmentState
	// Epoch -> first offset of that epoch inside this segment.
	SegmentLeaderEpochs map[LeaderEpoch]int64
	TxnIndexEmpty       bool
}

// clone returns a deep copy: callers may mutate what they get back.
func (m RemoteLogSegmentMetadata) clone() RemoteLogSegmentMetadata {
	m.CustomMetadata = cloneBytes(m.CustomMetadata)
	m.SegmentLeaderEpochs = maps.Clone(m.SegmentLeaderEpochs)
	return m
}

// sortedEpochs returns the segment's epochs in increasing order.
func (m RemoteLogSegmentMetadata) sortedEpochs() []LeaderEpoch {
	return slices.Sorted(maps.Keys(m.SegmentLeaderEpochs))
}

// epochRange returns the range [first, last] of epoch e inside the segment,
// and whether the segment carries e.
func (m RemoteLogSegmentMetadata) epochRange(e LeaderEpoch) (first, last int64, ok bool) {
	first, ok = m.SegmentLeaderEpochs[e]
	if !ok {
		return 0, 0, false
	}
	last = m.EndOffset
	for other, start := range m.SegmentLeaderEpochs {
		if other > e && start-1 < last {
			last = start - 1
		}
	}
	return first, last, true
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// RemoteLogSegmentMetadataUpdate moves a segment to a new state.
type RemoteLogSegmentMetadataUpdate struct {
	SegmentID        RemoteLogSegmentID
	EventTimestampMs int64
	CustomMetadata   []byte // nil: keep the stored value
	State            RemoteLogSegmentState
	BrokerID         int32
}

// RemotePartitionDeleteMetadata records the progress of a partition's deletion.
type RemotePartitionDeleteMetadata struct {
	TopicIDPartition TopicIDPartition
	State            RemotePartitionDeleteState
	EventTimestampMs int64
	BrokerID         int32
}

// RemoteLogMetadataManager is the store of remote log segment metadata that
// brokers share. See the package documentation for the exact behaviour.
type RemoteLogMetadataManager interface {
	AddRemoteLogSegmentMetadata(ctx context.Context, m RemoteLogSegmentMetadata) error
	UpdateRemoteLogSegmentMetadata(ctx context.Context, u RemoteLogSegmentMetadataUpdate) error
	RemoteLogSegmentMetadata(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch, offset int64) (RemoteLogSegmentMetadata, bool, error)
	HighestOffsetForEpoch(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch) (int64, bool, error)
	ListRemoteLogSegments(ctx context.Context, tp TopicIDPartition) ([]RemoteLogSegmentMetadata, error)
	ListRemoteLogSegmentsByEpoch(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch) ([]RemoteLogSegmentMetadata, error)
	PutRemotePartitionDeleteMetadata(ctx context.Context, m RemotePartitionDeleteMetadata) error
	CaughtUp(ctx context.Context, tp TopicIDPartition) (bool, error)
}

// KafkaExtensions are the calls newer Kafka brokers make of the store. Both
// InMemoryManager and PgManager implement them.
type KafkaExtensions interface {
	// RemoteLogSize is the sum of SegmentSizeInBytes over
	// ListRemoteLogSegmentsByEpoch(tp, epoch).
	RemoteLogSize(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch) (int64, error)
	// NextSegmentWithTxnIndex walks the finished segments of epoch as lookups
	// find them, starting at offset, and returns the first one whose
	// TxnIndexEmpty is false. The walk stops at the first miss.
	NextSegmentWithTxnIndex(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch, offset int64) (RemoteLogSegmentMetadata, bool, error)
	// FirstSegmentForTimestamp returns the first COPY_SEGMENT_FINISHED segment
	// carrying epoch, in the order of ListRemoteLogSegmentsByEpoch
	// (StartOffset, ties by the order added), whose MaxTimestampMs >=
	// timestampMs and EndOffset >= startingOffset: the segment whose time
	// index a broker reads to answer ListOffsets by timestamp. None:
	// (zero, false, nil).
	FirstSegmentForTimestamp(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch, timestampMs, startingOffset int64) (RemoteLogSegmentMetadata, bool, error)
	// EpochEndOffset is Kafka's meaning of "highest offset for epoch", for
	// brokers whose copy task resumes from it: the largest offset o such that
	// the range of epoch in some segment that reached COPY_SEGMENT_FINISHED
	// contains o. Segments deleted since still count (deletes never lower
	// it); DELETE_PARTITION_FINISHED forgets it. None: (0, false, nil).
	// Unlike HighestOffsetForEpoch (the largest EndOffset of the finished
	// segments carrying epoch), it never claims offsets of a later epoch
	// that share a segment with this one, so it is safe after an unclean
	// election.
	EpochEndOffset(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch) (int64, bool, error)
}

// Manager is what brokers call: the interface and the Kafka extensions,
// which InMemoryManager, PgManager and InstrumentedManager all implement.
type Manager interface {
	RemoteLogMetadataManager
	KafkaExtensions
}

// totalSize is the sum of the segments' SegmentSizeInBytes (RemoteLogSize).
func totalSize(segments []RemoteLogSegmentMetadata) int64 {
	var size int64
	for _, s := range segments {
		size += int64(s.SegmentSizeInBytes)
	}
	return size
}
