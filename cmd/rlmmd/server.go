package main

// server.go: the RemoteLogMetadataService, a thin adapter over the
// library's manager. Every method converts the request, calls the manager
// with the call's context (its deadline is the client's) and converts the
// answer or the error.

import (
	"context"
	"errors"
	"iter"
	"slices"
	"time"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	rs "github.com/krabka/remotestorage"
	pb "github.com/krabka/remotestorage/proto/remotestorage/v1"
)

// store is what the service needs of the manager: the Manager, its
// assignment hooks, the lists as streams, and partition-delete states.
// InstrumentedManager over a PgManager provides all of it.
type store interface {
	rs.Manager
	rs.SegmentStreams
	rs.PartitionDeleteStates
	OnPartitionLeadershipChanges(ctx context.Context, leaders, followers []rs.TopicIDPartition) error
	OnStopPartitions(ctx context.Context, partitions []rs.TopicIDPartition) error
}

// listBatch is how many segments one ListSegmentsResponse carries at most,
// and listBatchBytes how many bytes of encoded segments: large enough that
// the per-message cost vanishes (a segment is ~150 bytes without custom
// metadata), small enough that a message stays below gRPC's 4 MiB default
// limit on what a client receives, whatever the custom metadata (256
// segments of 64 KiB would be 16 MiB). A segment larger than listBatchBytes
// goes in a message of its own.
const (
	listBatch      = 256
	listBatchBytes = 1 << 20
)

type service struct {
	pb.UnimplementedRemoteLogMetadataServiceServer
	m     store
	pages *pageReleaser // told of each change of the partitions; nil: none
}

var _ pb.RemoteLogMetadataServiceServer = (*service)(nil)

// Reads of a partition the cache is still loading wait for the load, as
// Kafka's managers do (its topic-based manager blocks a read until the
// partition's metadata is loaded), instead of failing with ErrNotReady: the
// first reads after a leadership change would otherwise fail. They poll the
// cache, in memory, from loadPollFirst doubling to loadPollMax, within the
// call's deadline. CaughtUp still answers ErrNotReady at once: it is how a
// broker learns that the partition is loading.
const (
	loadPollFirst = time.Millisecond
	loadPollMax   = 50 * time.Millisecond
)

// untilLoaded runs read until it fails with something other than
// ErrNotReady, or the call's context ends (then the last error).
func untilLoaded[T any](ctx context.Context, read func() (T, error)) (T, error) {
	wait := loadPollFirst
	for {
		v, err := read()
		if !errors.Is(err, rs.ErrNotReady) {
			return v, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
		wait = min(2*wait, loadPollMax)
	}
}

// found is a read's answer of a value that may be absent.
type found[T any] struct {
	v  T
	ok bool
}

func untilLoadedFound[T any](ctx context.Context, read func() (T, bool, error)) (T, bool, error) {
	r, err := untilLoaded(ctx, func() (found[T], error) {
		v, ok, err := read()
		return found[T]{v, ok}, err
	})
	return r.v, r.ok, err
}

// deleted reports whether tp's deletion has finished, for the
// partition_deleted field of a read that found nothing (at
// DELETE_PARTITION_FINISHED every segment is forgotten, so a read that found
// something needs no look). Answered from the cache for a partition rlmmd
// consumes; one primary-key read otherwise.
func (s *service) deleted(ctx context.Context, tp rs.TopicIDPartition) (bool, error) {
	state, found, err := untilLoadedFound(ctx, func() (rs.RemotePartitionDeleteState, bool, error) {
		return s.m.PartitionDeleteState(ctx, tp)
	})
	return found && state == rs.DeletePartitionFinished, err
}

func (s *service) AddSegment(ctx context.Context, req *pb.AddSegmentRequest) (*pb.AddSegmentResponse, error) {
	seg, err := segmentFrom(req.GetSegment())
	if err != nil {
		return nil, invalidArgument(pb.ErrorKind_ERROR_KIND_INVALID_ADD, err)
	}
	if err := s.m.AddRemoteLogSegmentMetadata(ctx, seg); err != nil {
		return nil, toStatus(err)
	}
	return &pb.AddSegmentResponse{}, nil
}

func (s *service) UpdateSegment(ctx context.Context, req *pb.UpdateSegmentRequest) (*pb.UpdateSegmentResponse, error) {
	u, err := updateFrom(req.GetUpdate())
	if err != nil {
		return nil, invalidArgument(pb.ErrorKind_ERROR_KIND_UNSPECIFIED, err)
	}
	if err := s.m.UpdateRemoteLogSegmentMetadata(ctx, u); err != nil {
		return nil, toStatus(err)
	}
	return &pb.UpdateSegmentResponse{}, nil
}

func (s *service) PutPartitionDelete(ctx context.Context, req *pb.PutPartitionDeleteRequest) (*pb.PutPartitionDeleteResponse, error) {
	d, err := partitionDeleteFrom(req.GetPartitionDelete())
	if err != nil {
		return nil, invalidArgument(pb.ErrorKind_ERROR_KIND_UNSPECIFIED, err)
	}
	if err := s.m.PutRemotePartitionDeleteMetadata(ctx, d); err != nil {
		return nil, toStatus(err)
	}
	return &pb.PutPartitionDeleteResponse{}, nil
}

func (s *service) GetSegment(ctx context.Context, req *pb.GetSegmentRequest) (*pb.GetSegmentResponse, error) {
	tp, err := tpFrom(req.GetTopicIdPartition())
	if err != nil {
		return nil, invalidArgument(pb.ErrorKind_ERROR_KIND_UNSPECIFIED, err)
	}
	seg, found, err := untilLoadedFound(ctx, func() (rs.RemoteLogSegmentMetadata, bool, error) {
		return s.m.RemoteLogSegmentMetadata(ctx, tp, rs.LeaderEpoch(req.GetEpoch()), req.GetOffset())
	})
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &pb.GetSegmentResponse{}
	if found {
		resp.Segment = segmentTo(seg)
	} else if resp.PartitionDeleted, err = s.deleted(ctx, tp); err != nil {
		return nil, toStatus(err)
	}
	return resp, nil
}

func (s *service) HighestOffsetForEpoch(ctx context.Context, req *pb.HighestOffsetForEpochRequest) (*pb.HighestOffsetForEpochResponse, error) {
	tp, err := tpFrom(req.GetTopicIdPartition())
	if err != nil {
		return nil, invalidArgument(pb.ErrorKind_ERROR_KIND_UNSPECIFIED, err)
	}
	off, found, err := untilLoadedFound(ctx, func() (int64, bool, error) {
		return s.m.HighestOffsetForEpoch(ctx, tp, rs.LeaderEpoch(req.GetEpoch()))
	})
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &pb.HighestOffsetForEpochResponse{Found: found, Offset: off}
	if !found {
		if resp.PartitionDeleted, err = s.deleted(ctx, tp); err != nil {
			return nil, toStatus(err)
		}
	}
	return resp, nil
}

func (s *service) EpochEndOffset(ctx context.Context, req *pb.EpochEndOffsetRequest) (*pb.EpochEndOffsetResponse, error) {
	tp, err := tpFrom(req.GetTopicIdPartition())
	if err != nil {
		return nil, invalidArgument(pb.ErrorKind_ERROR_KIND_UNSPECIFIED, err)
	}
	off, found, err := untilLoadedFound(ctx, func() (int64, bool, error) {
		return s.m.EpochEndOffset(ctx, tp, rs.LeaderEpoch(req.GetEpoch()))
	})
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &pb.EpochEndOffsetResponse{Found: found, Offset: off}
	if !found {
		if resp.PartitionDeleted, err = s.deleted(ctx, tp); err != nil {
			return nil, toStatus(err)
		}
	}
	return resp, nil
}

func (s *service) ListSegments(req *pb.ListSegmentsRequest, stream pb.RemoteLogMetadataService_ListSegmentsServer) error {
	tp, err := tpFrom(req.GetTopicIdPartition())
	if err != nil {
		return invalidArgument(pb.ErrorKind_ERROR_KIND_UNSPECIFIED, err)
	}
	ctx := stream.Context()
	list := func() iter.Seq2[rs.RemoteLogSegmentMetadata, error] {
		if req.Epoch != nil {
			return s.m.RemoteLogSegmentsByEpoch(ctx, tp, rs.LeaderEpoch(req.GetEpoch()))
		}
		return s.m.RemoteLogSegments(ctx, tp)
	}
	// A stream of a partition still loading fails at its first item, before
	// anything was sent: wait for the load (untilLoaded), then list.
	var sent bool
	_, err = untilLoaded(ctx, func() (struct{}, error) { return struct{}{}, s.send(stream, list(), &sent) })
	if err != nil {
		if st, ok := err.(interface{ GRPCStatus() *status.Status }); ok && st.GRPCStatus() != nil {
			return err // Send's own error
		}
		return toStatus(err)
	}
	if !sent {
		deleted, err := s.deleted(ctx, tp)
		if err != nil {
			return toStatus(err)
		}
		if deleted {
			return stream.Send(&pb.ListSegmentsResponse{PartitionDeleted: true})
		}
	}
	return nil
}

// send streams seq in batches of at most listBatch segments and, unless one
// segment is larger, listBatchBytes; sent says whether a message went out. A failure of seq is returned as the library's error, before anything
// was sent only if it was its first item.
func (s *service) send(stream pb.RemoteLogMetadataService_ListSegmentsServer, seq iter.Seq2[rs.RemoteLogSegmentMetadata, error], sent *bool) error {
	batch := make([]*pb.Segment, 0, listBatch)
	size := 0
	flush := func() error {
		if err := stream.Send(&pb.ListSegmentsResponse{Segments: batch}); err != nil {
			return err
		}
		*sent = true
		batch, size = make([]*pb.Segment, 0, listBatch), 0
		return nil
	}
	for seg, err := range seq {
		if err != nil {
			if *sent || len(batch) > 0 {
				return toStatus(err) // mid-stream: no retry
			}
			return err
		}
		m := segmentTo(seg)
		n := proto.Size(m) + 8 // the field's tag and length
		if len(batch) > 0 && size+n > listBatchBytes {
			if err := flush(); err != nil {
				return err
			}
		}
		batch, size = append(batch, m), size+n
		if len(batch) == listBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if len(batch) > 0 {
		*sent = true
		return stream.Send(&pb.ListSegmentsResponse{Segments: batch})
	}
	return nil
}

func (s *service) RemoteLogSize(ctx context.Context, req *pb.RemoteLogSizeRequest) (*pb.RemoteLogSizeResponse, error) {
	tp, err := tpFrom(req.GetTopicIdPartition())
	if err != nil {
		return nil, invalidArgument(pb.ErrorKind_ERROR_KIND_UNSPECIFIED, err)
	}
	n, err := untilLoaded(ctx, func() (int64, error) {
		return s.m.RemoteLogSize(ctx, tp, rs.LeaderEpoch(req.GetEpoch()))
	})
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &pb.RemoteLogSizeResponse{SizeBytes: n}
	if n == 0 {
		if resp.PartitionDeleted, err = s.deleted(ctx, tp); err != nil {
			return nil, toStatus(err)
		}
	}
	return resp, nil
}

func (s *service) NextSegmentWithTxnIndex(ctx context.Context, req *pb.NextSegmentWithTxnIndexRequest) (*pb.NextSegmentWithTxnIndexResponse, error) {
	tp, err := tpFrom(req.GetTopicIdPartition())
	if err != nil {
		return nil, invalidArgument(pb.ErrorKind_ERROR_KIND_UNSPECIFIED, err)
	}
	seg, found, err := untilLoadedFound(ctx, func() (rs.RemoteLogSegmentMetadata, bool, error) {
		return s.m.NextSegmentWithTxnIndex(ctx, tp, rs.LeaderEpoch(req.GetEpoch()), req.GetOffset())
	})
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &pb.NextSegmentWithTxnIndexResponse{}
	if found {
		resp.Segment = segmentTo(seg)
	} else if resp.PartitionDeleted, err = s.deleted(ctx, tp); err != nil {
		return nil, toStatus(err)
	}
	return resp, nil
}

func (s *service) FirstSegmentForTimestamp(ctx context.Context, req *pb.FirstSegmentForTimestampRequest) (*pb.FirstSegmentForTimestampResponse, error) {
	tp, err := tpFrom(req.GetTopicIdPartition())
	if err != nil {
		return nil, invalidArgument(pb.ErrorKind_ERROR_KIND_UNSPECIFIED, err)
	}
	seg, found, err := untilLoadedFound(ctx, func() (rs.RemoteLogSegmentMetadata, bool, error) {
		return s.m.FirstSegmentForTimestamp(ctx, tp, rs.LeaderEpoch(req.GetEpoch()), req.GetTimestampMs(), req.GetStartingOffset())
	})
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &pb.FirstSegmentForTimestampResponse{}
	if found {
		resp.Segment = segmentTo(seg)
	} else if resp.PartitionDeleted, err = s.deleted(ctx, tp); err != nil {
		return nil, toStatus(err)
	}
	return resp, nil
}

func (s *service) CaughtUp(ctx context.Context, req *pb.CaughtUpRequest) (*pb.CaughtUpResponse, error) {
	tp, err := tpFrom(req.GetTopicIdPartition())
	if err != nil {
		return nil, invalidArgument(pb.ErrorKind_ERROR_KIND_UNSPECIFIED, err)
	}
	ok, err := s.m.CaughtUp(ctx, tp)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.CaughtUpResponse{CaughtUp: ok}, nil
}

func (s *service) OnPartitionLeadershipChanges(ctx context.Context, req *pb.OnPartitionLeadershipChangesRequest) (*pb.OnPartitionLeadershipChangesResponse, error) {
	leaders, err := tpsFrom(req.GetLeaders())
	if err != nil {
		return nil, invalidArgument(pb.ErrorKind_ERROR_KIND_UNSPECIFIED, err)
	}
	followers, err := tpsFrom(req.GetFollowers())
	if err != nil {
		return nil, invalidArgument(pb.ErrorKind_ERROR_KIND_UNSPECIFIED, err)
	}
	if err := s.m.OnPartitionLeadershipChanges(ctx, leaders, followers); err != nil {
		return nil, toStatus(err)
	}
	s.pages.changed(slices.Concat(leaders, followers))
	return &pb.OnPartitionLeadershipChangesResponse{}, nil
}

func (s *service) OnStopPartitions(ctx context.Context, req *pb.OnStopPartitionsRequest) (*pb.OnStopPartitionsResponse, error) {
	parts, err := tpsFrom(req.GetPartitions())
	if err != nil {
		return nil, invalidArgument(pb.ErrorKind_ERROR_KIND_UNSPECIFIED, err)
	}
	if err := s.m.OnStopPartitions(ctx, parts); err != nil {
		return nil, toStatus(err)
	}
	return &pb.OnStopPartitionsResponse{}, nil
}
