package main

// errors.go: the library's errors as gRPC statuses. Every error status
// carries an ErrorDetail naming the sentinel and whether a failed write may
// still have been applied (remotestorage.OutcomeUnknown), so that a client
// in any language can act as a Go caller of the library would.

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	rs "github.com/krabka/remotestorage"
	pb "github.com/krabka/remotestorage/proto/remotestorage/v1"
)

// sentinelStatus pairs each sentinel with its kind and code.
var sentinelStatus = []struct {
	sentinel error
	kind     pb.ErrorKind
	code     codes.Code
}{
	{rs.ErrInvalidAdd, pb.ErrorKind_ERROR_KIND_INVALID_ADD, codes.InvalidArgument},
	{rs.ErrSegmentNotFound, pb.ErrorKind_ERROR_KIND_SEGMENT_NOT_FOUND, codes.NotFound},
	{rs.ErrInvalidSegmentTransition, pb.ErrorKind_ERROR_KIND_INVALID_SEGMENT_TRANSITION, codes.FailedPrecondition},
	{rs.ErrInvalidPartitionDeleteTransition, pb.ErrorKind_ERROR_KIND_INVALID_PARTITION_DELETE_TRANSITION, codes.FailedPrecondition},
	{rs.ErrNotReady, pb.ErrorKind_ERROR_KIND_NOT_READY, codes.Unavailable},
	{rs.ErrIO, pb.ErrorKind_ERROR_KIND_IO, codes.Unavailable},
}

// toStatus turns an error of the library into a status error.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	code, kind := codes.Unknown, pb.ErrorKind_ERROR_KIND_UNSPECIFIED
	for _, s := range sentinelStatus {
		if errors.Is(err, s.sentinel) {
			code, kind = s.code, s.kind
			break
		}
	}
	// A store failure that the call's deadline or cancellation caused says so.
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	}
	detail := &pb.ErrorDetail{Kind: kind, OutcomeUnknown: rs.OutcomeUnknown(err)}
	if st, ok := rs.SegmentStateFound(err); ok {
		detail.FoundSegmentState = segmentStateTo(st).Enum()
	}
	if st, hasRecord, ok := rs.PartitionDeleteStateFound(err); ok {
		found := pb.PartitionDeleteState_PARTITION_DELETE_STATE_UNSPECIFIED
		if hasRecord {
			found = partitionDeleteStateTo(st)
		}
		detail.FoundPartitionDeleteState = found.Enum()
	}
	return withDetail(status.New(code, err.Error()), detail)
}

// invalidArgument refuses a malformed request; kind says which library
// error the call would have returned (ERROR_KIND_INVALID_ADD for an add:
// nothing was stored).
func invalidArgument(kind pb.ErrorKind, err error) error {
	return withDetail(status.New(codes.InvalidArgument, err.Error()), &pb.ErrorDetail{Kind: kind})
}

func withDetail(st *status.Status, d *pb.ErrorDetail) error {
	withD, err := st.WithDetails(d)
	if err != nil {
		return st.Err() // cannot happen: ErrorDetail always marshals
	}
	return withD.Err()
}

// ErrorFromStatus is the inverse of toStatus, for Go clients: an error that
// matches the sentinel the status names (errors.Is), and reports the
// status's outcome through outcomeUnknown.
func errorFromStatus(err error) (sentinel error, outcomeUnknown bool) {
	st, ok := status.FromError(err)
	if !ok {
		return nil, false
	}
	for _, d := range st.Details() {
		detail, ok := d.(*pb.ErrorDetail)
		if !ok {
			continue
		}
		for _, s := range sentinelStatus {
			if s.kind == detail.GetKind() {
				return s.sentinel, detail.GetOutcomeUnknown()
			}
		}
		return nil, detail.GetOutcomeUnknown()
	}
	return nil, false
}
