package partition

import "github.com/google/uuid"

// Segment is a segment as it goes into a Partition (Store) and comes out
// whole (Ref.Segment): RemoteLogSegmentMetadata's fields, with the epoch
// map as a slice sorted by epoch, and the write orders that the semantics
// need. The partition does not keep it: it copies its fields into its own
// columns (partition.go). The root package builds it from the caller's
// form, and the caller's form from a Ref.
type Segment struct {
	TP                    TopicIDPartition
	ID                    uuid.UUID
	Start, End            int64 // inclusive
	MaxTimestampMs        int64
	EventTimestampMs      int64
	BrokerID, SizeInBytes int32
	CustomMetadata        []byte       // nil: none
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

// Ref is a segment a partition holds, read where it lies: the queries
// answer with one, and the caller copies what it needs while it holds the
// owner's lock. A Ref is valid until the partition's next write.
type Ref struct {
	p   *Partition
	pos int32
}

func (r Ref) ID() uuid.UUID           { return r.p.ids[r.pos] }
func (r Ref) Start() int64            { return r.p.start.get(r.pos) }
func (r Ref) End() int64              { return r.p.end.get(r.pos) }
func (r Ref) MaxTimestampMs() int64   { return r.p.maxTimestamp.get(r.pos) }
func (r Ref) EventTimestampMs() int64 { return r.p.eventTimestamp.get(r.pos) }
func (r Ref) BrokerID() int32         { return r.p.brokerID[r.pos] }
func (r Ref) SizeInBytes() int32      { return r.p.sizeInBytes[r.pos] }
func (r Ref) State() int8             { return r.p.state[r.pos] }
func (r Ref) TxnIndexEmpty() bool     { return r.p.flags[r.pos]&flagTxnIndexEmpty != 0 }
func (r Ref) AddedVersion() int64     { return r.p.added.get(r.pos) }
func (r Ref) FinishedVersion() int64  { return r.p.finished.get(r.pos) }
func (r Ref) LastVersion() int64      { return r.p.last.get(r.pos) }

// TopicIDPartition is the partition as the segment names it.
func (r Ref) TopicIDPartition() TopicIDPartition {
	if r.p.flags[r.pos]&flagOwnTP != 0 {
		return r.p.ownTP[r.ID()]
	}
	return r.p.tp
}

// CustomMetadata returns the stored bytes themselves, which nobody writes
// to (copy them before handing them out); nil: none.
func (r Ref) CustomMetadata() []byte { return r.p.customOf(r.pos) }

// NumEpochs is the number of entries of the segment's epoch map.
func (r Ref) NumEpochs() int {
	first, end := r.p.epochsOf(r.pos)
	return int(end - first)
}

// Epoch returns entry k of the segment's epoch map, in epoch order.
func (r Ref) Epoch(k int) EpochStart {
	e := r.p.epochAt[r.pos] + int32(k)
	return EpochStart{Epoch: r.p.epochNum[e], Start: r.p.epochStart[e]}
}

// Carries reports whether the segment carries epoch.
func (r Ref) Carries(epoch int32) bool {
	first, end := r.p.epochsOf(r.pos)
	for e := first; e < end; e++ {
		if r.p.epochNum[e] == epoch {
			return true
		}
	}
	return false
}

// Segment returns a copy of the segment (its CustomMetadata is the stored
// bytes, as CustomMetadata returns them).
func (r Ref) Segment() Segment {
	s := Segment{
		TP: r.TopicIDPartition(), ID: r.ID(), Start: r.Start(), End: r.End(),
		MaxTimestampMs: r.MaxTimestampMs(), EventTimestampMs: r.EventTimestampMs(),
		BrokerID: r.BrokerID(), SizeInBytes: r.SizeInBytes(), CustomMetadata: r.CustomMetadata(),
		Epochs: make([]EpochStart, r.NumEpochs()), State: r.State(), TxnIndexEmpty: r.TxnIndexEmpty(),
		AddedVersion: r.AddedVersion(), FinishedVersion: r.FinishedVersion(), LastVersion: r.LastVersion(),
	}
	for k := range s.Epochs {
		s.Epochs[k] = r.Epoch(k)
	}
	return s
}
