package remotestorage

import (
	"iter"

	"github.com/krabka/remotestorage/internal/partition"
)

// segment.go: the public segment to and from the form both managers keep
// in memory (internal/partition, the reference semantics they share).

// newSegment stores meta (which it takes over: pass a copy the caller
// keeps no reference to) with its epoch map compacted.
func newSegment(meta RemoteLogSegmentMetadata, addedVersion, finishedVersion, lastVersion int64) *partition.Segment {
	s := &partition.Segment{
		TP: partition.TopicIDPartition(meta.SegmentID.TopicIDPartition), ID: meta.SegmentID.ID,
		Start: meta.StartOffset, End: meta.EndOffset,
		MaxTimestampMs: meta.MaxTimestampMs, EventTimestampMs: meta.EventTimestampMs,
		BrokerID: meta.BrokerID, SizeInBytes: meta.SegmentSizeInBytes, CustomMetadata: meta.CustomMetadata,
		State: int8(meta.State), TxnIndexEmpty: meta.TxnIndexEmpty,
		AddedVersion: addedVersion, FinishedVersion: finishedVersion, LastVersion: lastVersion,
	}
	s.Epochs = make([]partition.EpochStart, 0, len(meta.SegmentLeaderEpochs))
	for _, e := range meta.sortedEpochs() {
		s.Epochs = append(s.Epochs, partition.EpochStart{Epoch: int32(e), Start: meta.SegmentLeaderEpochs[e]})
	}
	return s
}

// publicSegment returns a copy of the segment r reads, as callers see it,
// epoch map included.
func publicSegment(r partition.Ref) RemoteLogSegmentMetadata {
	n := r.NumEpochs()
	m := RemoteLogSegmentMetadata{
		SegmentID:   RemoteLogSegmentID{TopicIDPartition: TopicIDPartition(r.TopicIDPartition()), ID: r.ID()},
		StartOffset: r.Start(), EndOffset: r.End(), MaxTimestampMs: r.MaxTimestampMs(),
		BrokerID: r.BrokerID(), EventTimestampMs: r.EventTimestampMs(), SegmentSizeInBytes: r.SizeInBytes(),
		CustomMetadata: cloneBytes(r.CustomMetadata()), State: RemoteLogSegmentState(r.State()), TxnIndexEmpty: r.TxnIndexEmpty(),
		SegmentLeaderEpochs: make(map[LeaderEpoch]int64, n),
	}
	for k := range n {
		e := r.Epoch(k)
		m.SegmentLeaderEpochs[LeaderEpoch(e.Epoch)] = e.Start
	}
	return m
}

// publicSegments returns copies of the segments of list.
func publicSegments(list iter.Seq[partition.Ref]) []RemoteLogSegmentMetadata {
	var out []RemoteLogSegmentMetadata
	for r := range list {
		out = append(out, publicSegment(r))
	}
	return out
}

// carries is partition.Carries of a LeaderEpoch.
func carries(epoch LeaderEpoch) func(partition.Ref) bool { return partition.Carries(int32(epoch)) }
