package remotestorage

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"
)

// OutcomeUnknown reports whether err, returned by a write (add, update,
// partition delete), leaves open whether the write was applied: the request
// may have reached the database and committed although the call failed,
// because the connection broke after the statement was sent (io.ErrUnexpectedEOF,
// "connection reset by peer"), the server was shut down under it (FATAL
// 57P01), or the caller's context ended while it ran.
//
// It is false when the write certainly did not apply:
//   - err is nil, or a refusal: ErrInvalidAdd, ErrSegmentNotFound,
//     ErrInvalidSegmentTransition, ErrInvalidPartitionDeleteTransition,
//     ErrNotReady (the store decided, and a refused write stores nothing);
//   - the connection could not be opened (*pgconn.ConnectError, or the
//     connect backoff of ConfigurePool refusing an attempt), or the pool was
//     closed;
//   - pgx says nothing was sent (pgconn.SafeToRetry);
//   - the server answered the statement with an ERROR (constraint,
//     serialization failure, statement cancelled…): the statement ran in its
//     own transaction, which the error rolled back;
//   - the context's deadline passed while waiting for a pooled connection.
//
// When the context ends while the statement runs, the call returns at once
// and the outcome is unknown: the manager asks the server to cancel the
// statement and keeps the connection for the pool, but the statement may
// commit before the cancel reaches it.
//
// Both kinds match ErrIO. A context cancelled (rather than timed out) is
// reported as unknown even while waiting for a connection: pgx reports a
// cancelled read and a cancelled wait with the same bare context.Canceled.
//
// A broker resolves an unknown outcome by reading back (see the example):
// an add is applied when ListRemoteLogSegments holds its segment id; an
// update when the segment is in the update's state with its BrokerID and
// EventTimestampMs. Retrying is also safe: a retried add of an applied
// segment fails with ErrInvalidAdd (the id is taken), and a retried update is
// a self-transition, an idempotent retry.
func OutcomeUnknown(err error) bool {
	if err == nil {
		return false
	}
	var se *sentinelError
	if errors.As(err, &se) {
		cause, isIO := se.ioCause()
		switch {
		case !isIO:
			return false // a refusal: the store decided, nothing was written
		case cause == nil:
			return true
		}
		return causeOutcomeUnknown(driverCause(cause))
	}
	for _, s := range refusals {
		if errors.Is(err, s) {
			return false
		}
	}
	return causeOutcomeUnknown(err)
}

// refusals are the sentinels of writes the store refused.
var refusals = []error{ErrInvalidAdd, ErrSegmentNotFound, ErrInvalidSegmentTransition, ErrInvalidPartitionDeleteTransition, ErrNotReady}

// driverCause undoes ioError's join of the driver's error with the
// context's: what matters is how the driver failed.
func driverCause(cause error) error {
	if joined, ok := cause.(interface{ Unwrap() []error }); ok {
		if errs := joined.Unwrap(); len(errs) == 2 && isContextError(errs[1]) {
			return errs[0]
		}
	}
	return cause
}

func isContextError(err error) bool {
	return err == context.Canceled || err == context.DeadlineExceeded
}

func causeOutcomeUnknown(cause error) bool {
	if errors.Is(cause, errNotApplied) {
		return false
	}
	var abandoned *statementAbandonedError
	if errors.As(cause, &abandoned) {
		return true // the statement was sent, and may commit after the call
	}
	var connectErr *pgconn.ConnectError
	if errors.As(cause, &connectErr) {
		return false // no connection, nothing sent
	}
	if pgconn.SafeToRetry(cause) {
		return false // pgx: nothing was sent
	}
	if errors.Is(cause, puddle.ErrClosedPool) {
		return false // the pool was closed: no connection to send on
	}
	var pgErr *pgconn.PgError
	if errors.As(cause, &pgErr) {
		// An ERROR rolls back the statement's implicit transaction. A FATAL
		// or PANIC (57P01 admin shutdown, 57P02 crash shutdown…) ends the
		// session, possibly after the commit.
		severity := pgErr.SeverityUnlocalized
		if severity == "" {
			severity = pgErr.Severity
		}
		return severity == "FATAL" || severity == "PANIC"
	}
	// pgxpool returns the bare context error when the deadline passes while
	// waiting for a connection; pgconn wraps a deadline that interrupts a
	// statement in flight (pgconn.Timeout).
	if errors.Is(cause, context.DeadlineExceeded) && !pgconn.Timeout(cause) {
		return false
	}
	return true
}
