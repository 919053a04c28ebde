package main

// convert.go: the messages of proto/remotestorage/v1 to and from the
// library's types. A malformed message (an id that is not 16 bytes, an
// epoch given twice) is refused here with INVALID_ARGUMENT, before the
// library sees it.

import (
	"fmt"
	"slices"

	"github.com/google/uuid"

	rs "github.com/krabka/remotestorage"
	pb "github.com/krabka/remotestorage/proto/remotestorage/v1"
)

// invalidState is a state value that is none of the library's, for
// SEGMENT_STATE_UNSPECIFIED and unknown enum numbers: the library refuses it
// as it refuses any state outside its four.
const invalidState = -1

func uuidFrom(b []byte, what string) (uuid.UUID, error) {
	if len(b) != 16 {
		return uuid.UUID{}, fmt.Errorf("%s: want 16 bytes, got %d", what, len(b))
	}
	return uuid.UUID(b), nil
}

func tpFrom(m *pb.TopicIdPartition) (rs.TopicIDPartition, error) {
	if m == nil {
		return rs.TopicIDPartition{}, fmt.Errorf("topic_id_partition is missing")
	}
	id, err := uuidFrom(m.GetTopicId(), "topic_id_partition.topic_id")
	if err != nil {
		return rs.TopicIDPartition{}, err
	}
	return rs.TopicIDPartition{TopicID: id, Topic: m.GetTopic(), Partition: m.GetPartition()}, nil
}

func tpsFrom(ms []*pb.TopicIdPartition) ([]rs.TopicIDPartition, error) {
	out := make([]rs.TopicIDPartition, 0, len(ms))
	for _, m := range ms {
		tp, err := tpFrom(m)
		if err != nil {
			return nil, err
		}
		out = append(out, tp)
	}
	return out, nil
}

func tpTo(tp rs.TopicIDPartition) *pb.TopicIdPartition {
	return &pb.TopicIdPartition{TopicId: tp.TopicID[:], Topic: tp.Topic, Partition: tp.Partition}
}

func segmentIDFrom(m *pb.SegmentId) (rs.RemoteLogSegmentID, error) {
	if m == nil {
		return rs.RemoteLogSegmentID{}, fmt.Errorf("segment id is missing")
	}
	tp, err := tpFrom(m.GetTopicIdPartition())
	if err != nil {
		return rs.RemoteLogSegmentID{}, err
	}
	id, err := uuidFrom(m.GetId(), "segment id")
	if err != nil {
		return rs.RemoteLogSegmentID{}, err
	}
	return rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: id}, nil
}

func segmentStateFrom(s pb.SegmentState) rs.RemoteLogSegmentState {
	switch s {
	case pb.SegmentState_SEGMENT_STATE_COPY_SEGMENT_STARTED:
		return rs.CopySegmentStarted
	case pb.SegmentState_SEGMENT_STATE_COPY_SEGMENT_FINISHED:
		return rs.CopySegmentFinished
	case pb.SegmentState_SEGMENT_STATE_DELETE_SEGMENT_STARTED:
		return rs.DeleteSegmentStarted
	case pb.SegmentState_SEGMENT_STATE_DELETE_SEGMENT_FINISHED:
		return rs.DeleteSegmentFinished
	}
	return invalidState
}

func segmentStateTo(s rs.RemoteLogSegmentState) pb.SegmentState {
	switch s {
	case rs.CopySegmentStarted:
		return pb.SegmentState_SEGMENT_STATE_COPY_SEGMENT_STARTED
	case rs.CopySegmentFinished:
		return pb.SegmentState_SEGMENT_STATE_COPY_SEGMENT_FINISHED
	case rs.DeleteSegmentStarted:
		return pb.SegmentState_SEGMENT_STATE_DELETE_SEGMENT_STARTED
	case rs.DeleteSegmentFinished:
		return pb.SegmentState_SEGMENT_STATE_DELETE_SEGMENT_FINISHED
	}
	return pb.SegmentState_SEGMENT_STATE_UNSPECIFIED
}

func partitionDeleteStateFrom(s pb.PartitionDeleteState) rs.RemotePartitionDeleteState {
	switch s {
	case pb.PartitionDeleteState_PARTITION_DELETE_STATE_DELETE_PARTITION_MARKED:
		return rs.DeletePartitionMarked
	case pb.PartitionDeleteState_PARTITION_DELETE_STATE_DELETE_PARTITION_STARTED:
		return rs.DeletePartitionStarted
	case pb.PartitionDeleteState_PARTITION_DELETE_STATE_DELETE_PARTITION_FINISHED:
		return rs.DeletePartitionFinished
	}
	return invalidState
}

func partitionDeleteStateTo(s rs.RemotePartitionDeleteState) pb.PartitionDeleteState {
	switch s {
	case rs.DeletePartitionMarked:
		return pb.PartitionDeleteState_PARTITION_DELETE_STATE_DELETE_PARTITION_MARKED
	case rs.DeletePartitionStarted:
		return pb.PartitionDeleteState_PARTITION_DELETE_STATE_DELETE_PARTITION_STARTED
	case rs.DeletePartitionFinished:
		return pb.PartitionDeleteState_PARTITION_DELETE_STATE_DELETE_PARTITION_FINISHED
	}
	return pb.PartitionDeleteState_PARTITION_DELETE_STATE_UNSPECIFIED
}

func segmentFrom(m *pb.Segment) (rs.RemoteLogSegmentMetadata, error) {
	if m == nil {
		return rs.RemoteLogSegmentMetadata{}, fmt.Errorf("segment is missing")
	}
	id, err := segmentIDFrom(m.GetId())
	if err != nil {
		return rs.RemoteLogSegmentMetadata{}, err
	}
	epochs := make(map[rs.LeaderEpoch]int64, len(m.GetSegmentLeaderEpochs()))
	for _, e := range m.GetSegmentLeaderEpochs() {
		if _, dup := epochs[rs.LeaderEpoch(e.GetEpoch())]; dup {
			return rs.RemoteLogSegmentMetadata{}, fmt.Errorf("segment_leader_epochs: epoch %d given twice", e.GetEpoch())
		}
		epochs[rs.LeaderEpoch(e.GetEpoch())] = e.GetStartOffset()
	}
	return rs.RemoteLogSegmentMetadata{
		SegmentID:           id,
		StartOffset:         m.GetStartOffset(),
		EndOffset:           m.GetEndOffset(),
		MaxTimestampMs:      m.GetMaxTimestampMs(),
		BrokerID:            m.GetBrokerId(),
		EventTimestampMs:    m.GetEventTimestampMs(),
		SegmentSizeInBytes:  m.GetSegmentSizeInBytes(),
		CustomMetadata:      bytesOrNil(m.CustomMetadata),
		State:               segmentStateFrom(m.GetState()),
		SegmentLeaderEpochs: epochs,
		TxnIndexEmpty:       m.GetTxnIndexEmpty(),
	}, nil
}

// bytesOrNil keeps "absent" (nil) apart from "present and empty".
func bytesOrNil(b []byte) []byte {
	if b == nil {
		return nil
	}
	if len(b) == 0 {
		return []byte{}
	}
	return b
}

func segmentTo(s rs.RemoteLogSegmentMetadata) *pb.Segment {
	epochs := make([]*pb.EpochStart, 0, len(s.SegmentLeaderEpochs))
	for e, off := range s.SegmentLeaderEpochs {
		epochs = append(epochs, &pb.EpochStart{Epoch: int32(e), StartOffset: off})
	}
	slices.SortFunc(epochs, func(a, b *pb.EpochStart) int { return int(a.Epoch) - int(b.Epoch) })
	m := &pb.Segment{
		Id: &pb.SegmentId{
			TopicIdPartition: tpTo(s.SegmentID.TopicIDPartition),
			Id:               s.SegmentID.ID[:],
		},
		StartOffset:         s.StartOffset,
		EndOffset:           s.EndOffset,
		MaxTimestampMs:      s.MaxTimestampMs,
		BrokerId:            s.BrokerID,
		EventTimestampMs:    s.EventTimestampMs,
		SegmentSizeInBytes:  s.SegmentSizeInBytes,
		State:               segmentStateTo(s.State),
		SegmentLeaderEpochs: epochs,
		TxnIndexEmpty:       s.TxnIndexEmpty,
	}
	if s.CustomMetadata != nil {
		m.CustomMetadata = s.CustomMetadata
	}
	return m
}

func updateFrom(m *pb.SegmentUpdate) (rs.RemoteLogSegmentMetadataUpdate, error) {
	if m == nil {
		return rs.RemoteLogSegmentMetadataUpdate{}, fmt.Errorf("update is missing")
	}
	id, err := segmentIDFrom(m.GetId())
	if err != nil {
		return rs.RemoteLogSegmentMetadataUpdate{}, err
	}
	return rs.RemoteLogSegmentMetadataUpdate{
		SegmentID:        id,
		EventTimestampMs: m.GetEventTimestampMs(),
		CustomMetadata:   bytesOrNil(m.CustomMetadata),
		State:            segmentStateFrom(m.GetState()),
		BrokerID:         m.GetBrokerId(),
	}, nil
}

func partitionDeleteFrom(m *pb.PartitionDelete) (rs.RemotePartitionDeleteMetadata, error) {
	if m == nil {
		return rs.RemotePartitionDeleteMetadata{}, fmt.Errorf("partition_delete is missing")
	}
	tp, err := tpFrom(m.GetTopicIdPartition())
	if err != nil {
		return rs.RemotePartitionDeleteMetadata{}, err
	}
	return rs.RemotePartitionDeleteMetadata{
		TopicIDPartition: tp,
		State:            partitionDeleteStateFrom(m.GetState()),
		EventTimestampMs: m.GetEventTimestampMs(),
		BrokerID:         m.GetBrokerId(),
	}, nil
}
