package partition

import "github.com/google/uuid"

// Segment is a segment as a Partition holds it: RemoteLogSegmentMetadata's
// fields, laid out compactly (a cache holds millions). The TopicIDPartition
// is shared by the partition's segments that name it alike (Store), and the
// epoch map is a slice sorted by epoch (a Go map costs about 200 bytes even
// for one entry; the slice costs 16 per epoch). The root package builds the
// caller's form from it.
type Segment struct {
	TP                    *TopicIDPartition
	ID                    uuid.UUID
	Start, End            int64 // inclusive
	MaxTimestampMs        int64
	EventTimestampMs      int64
	BrokerID, SizeInBytes int32
	CustomMetadata        []byte
	Epochs                []EpochStart // sorted by epoch
	State                 int8         // the RemoteLogSegmentState code
	TxnIndexEmpty         bool
	AddedVersion          int64 // the write order of the add
	FinishedVersion       int64 // the write order of the first COPY_SEGMENT_FINISHED; 0: never finished
	LastVersion           int64 // the order of the latest write among the segment's writes
}

// EpochStart is one entry of a segment's epoch map.
type EpochStart struct {
	Epoch int32
	Start int64
}

// Carries reports whether the segment carries epoch.
func (s *Segment) Carries(epoch int32) bool {
	for _, e := range s.Epochs {
		if e.Epoch == epoch {
			return true
		}
	}
	return false
}

// EpochRanges yields the range [first, last] of each epoch of the segment.
func (s *Segment) EpochRanges(yield func(epoch int32, first, last int64)) {
	for i, e := range s.Epochs {
		last := s.End
		if i+1 < len(s.Epochs) {
			last = s.Epochs[i+1].Start - 1
		}
		yield(e.Epoch, e.Start, last)
	}
}
