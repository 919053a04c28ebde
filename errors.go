package remotestorage

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
)

var (
	// ErrInvalidAdd: an added segment broke a rule (bad field, id already
	// taken, partition being deleted). Nothing was stored.
	ErrInvalidAdd = errors.New("remotestorage: invalid add")
	// ErrSegmentNotFound: an update named a segment id that was never added
	// to that partition, or whose partition was deleted.
	ErrSegmentNotFound = errors.New("remotestorage: segment not found")
	// ErrInvalidSegmentTransition: an update asked for a transition the
	// segment state machine forbids. The stored segment is unchanged.
	ErrInvalidSegmentTransition = errors.New("remotestorage: invalid segment state transition")
	// ErrInvalidPartitionDeleteTransition: a partition-delete record asked
	// for a transition the partition-delete state machine forbids.
	ErrInvalidPartitionDeleteTransition = errors.New("remotestorage: invalid partition delete state transition")
	// ErrNotReady: the manager is still loading a partition it has just
	// taken on.
	ErrNotReady = errors.New("remotestorage: not ready")
	// ErrIO: the store failed. The error also wraps the underlying cause.
	ErrIO = errors.New("remotestorage: store failure")
	// ErrSchemaMismatch: NewPgManager found the database's schema at a
	// version this code cannot use: not migrated, migrated to an older
	// version than SchemaVersion, or to a newer one that does not declare
	// this code compatible (docs/MIGRATIONS.md). The detail says what to
	// run. Nothing was changed.
	ErrSchemaMismatch = errors.New("remotestorage: schema version mismatch")
)

// sentinelError wraps a sentinel with detail; Error() reads
// "<sentinel>: <detail>".
type sentinelError struct {
	sentinel error
	detail   string
	cause    error // optional underlying error, also matched by errors.Is/As
	// found is the state a refused transition found: a
	// RemoteLogSegmentState or a RemotePartitionDeleteState
	// (partitionDeleteNone: no record); nil when none was read.
	found any
}

// segmentTransitionError refuses an update of segment id from state from to
// state to.
func segmentTransitionError(id uuid.UUID, from, to RemoteLogSegmentState) error {
	return &sentinelError{sentinel: ErrInvalidSegmentTransition, detail: fmt.Sprintf("segment %s: %s to %s", id, from, to), found: from}
}

// partitionDeleteTransitionError refuses a partition-delete event of tp
// from delete state from (partitionDeleteNone: no record) to to.
func partitionDeleteTransitionError(tp TopicIDPartition, from, to RemotePartitionDeleteState) error {
	return &sentinelError{sentinel: ErrInvalidPartitionDeleteTransition, detail: fmt.Sprintf("partition %s: %s to %s", tp, from, to), found: from}
}

// SegmentStateFound returns the state in which a refused update
// (ErrInvalidSegmentTransition) found its segment. ok is false for any
// other error, and for a refusal that needed no look at the segment: a
// state no segment may move to, or custom metadata over the limit.
func SegmentStateFound(err error) (state RemoteLogSegmentState, ok bool) {
	var e *sentinelError
	if errors.As(err, &e) {
		state, ok = e.found.(RemoteLogSegmentState)
	}
	return state, ok
}

// PartitionDeleteStateFound returns the delete state in which a refused
// partition-delete event (ErrInvalidPartitionDeleteTransition) found its
// partition; hasRecord is false when the partition had no delete record.
// ok is false for any other error, and for a refusal that needed no look
// at the partition (a malformed event).
func PartitionDeleteStateFound(err error) (state RemotePartitionDeleteState, hasRecord, ok bool) {
	var e *sentinelError
	if errors.As(err, &e) {
		state, ok = e.found.(RemotePartitionDeleteState)
	}
	if !ok || state == partitionDeleteNone {
		return 0, false, ok
	}
	return state, true, true
}

func (e *sentinelError) Error() string {
	if e.cause != nil {
		return e.sentinel.Error() + ": " + e.detail + ": " + e.cause.Error()
	}
	return e.sentinel.Error() + ": " + e.detail
}

func (e *sentinelError) Unwrap() []error {
	if e.cause != nil {
		return []error{e.sentinel, e.cause}
	}
	return []error{e.sentinel}
}

// errNotApplied is the cause of an ErrIO that the manager raised itself,
// having sent no write that could commit: the write certainly did not
// apply.
var errNotApplied = errors.New("nothing was written")

// notAppliedError is the ErrIO of a write that was not applied, and whose
// outcome is therefore known (errNotApplied).
func notAppliedError(format string, args ...any) error {
	return &sentinelError{sentinel: ErrIO, detail: fmt.Sprintf(format, args...), cause: errNotApplied}
}

// ioCause returns the store failure e wraps, and whether e is an ErrIO at
// all (false: a refusal).
func (e *sentinelError) ioCause() (cause error, isIO bool) {
	return e.cause, e.sentinel == ErrIO
}

func newError(sentinel error, format string, args ...any) error {
	return &sentinelError{sentinel: sentinel, detail: fmt.Sprintf(format, args...)}
}

// ioError wraps a store failure: it matches ErrIO and keeps cause visible to
// errors.Is and errors.As. When ctx is done, its error is matched too, even
// if the driver reported the failure in its own words.
func ioError(ctx context.Context, cause error, format string, args ...any) error {
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(cause, ctxErr) {
		cause = errors.Join(cause, ctxErr)
	}
	return &sentinelError{sentinel: ErrIO, detail: fmt.Sprintf(format, args...), cause: cause}
}
