package remotestorage

import "github.com/krabka/remotestorage/internal/partition"

// segment.go: the public segment to and from the form both managers keep
// in memory (internal/partition, the reference semantics they share).

// newSegment stores meta (which it takes over: pass a copy the caller
// keeps no reference to) with its epoch map compacted.
func newSegment(meta RemoteLogSegmentMetadata, addedVersion, finishedVersion, lastVersion int64) *partition.Segment {
	tp := partition.TopicIDPartition(meta.SegmentID.TopicIDPartition)
	s := &partition.Segment{
		TP: &tp, ID: meta.SegmentID.ID, Start: meta.StartOffset, End: meta.EndOffset,
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

// publicSegment returns a copy of s as callers see it, epoch map included.
func publicSegment(s *partition.Segment) RemoteLogSegmentMetadata {
	m := RemoteLogSegmentMetadata{
		SegmentID:   RemoteLogSegmentID{TopicIDPartition: TopicIDPartition(*s.TP), ID: s.ID},
		StartOffset: s.Start, EndOffset: s.End, MaxTimestampMs: s.MaxTimestampMs,
		BrokerID: s.BrokerID, EventTimestampMs: s.EventTimestampMs, SegmentSizeInBytes: s.SizeInBytes,
		CustomMetadata: cloneBytes(s.CustomMetadata), State: RemoteLogSegmentState(s.State), TxnIndexEmpty: s.TxnIndexEmpty,
		SegmentLeaderEpochs: make(map[LeaderEpoch]int64, len(s.Epochs)),
	}
	for _, e := range s.Epochs {
		m.SegmentLeaderEpochs[LeaderEpoch(e.Epoch)] = e.Start
	}
	return m
}

// publicSegments returns copies of the segments of list.
func publicSegments(list func(yield func(*partition.Segment) bool)) []RemoteLogSegmentMetadata {
	var out []RemoteLogSegmentMetadata
	for s := range list {
		out = append(out, publicSegment(s))
	}
	return out
}

// carries is partition.Carries of a LeaderEpoch.
func carries(epoch LeaderEpoch) func(*partition.Segment) bool { return partition.Carries(int32(epoch)) }
