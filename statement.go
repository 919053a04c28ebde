package remotestorage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/krabka/remotestorage/db"
)

// A caller's deadline must not cost the pool its connection. pgx, by
// default, closes a connection whose statement a context interrupts (the
// socket's deadline is set to now); only a pool whose context watcher
// sends a cancel request instead (ConfigurePool) keeps it. A new connection
// then pays for its first statements again (connect, catalog loading,
// planning, the row rules' compilation: several warm statements' worth),
// so with short deadlines on a plain pool each replacement was canceled in
// turn and no write succeeded.
//
// runStatement therefore runs the statement under a context the caller
// cannot cancel. When the caller's context ends first, the call returns at
// once with an error for which OutcomeUnknown is true, and in the
// background the manager asks the server to cancel the statement (a cancel
// request, as ConfigurePool's pools do, sent again while the statement
// runs on), waits for its end and gives the connection back to the pool.
// Should the server not end it within DefaultCancelDeadlineDelay, the
// statement's own context is cancelled: the pool's context watcher then
// closes the connection.

// statementAbandonedError is the cause of a call whose context ended while
// its statement ran: the statement may still commit.
type statementAbandonedError struct {
	ctxErr error // the caller's context's error
}

func (e *statementAbandonedError) Error() string {
	return fmt.Sprintf("the call's context ended while its statement ran (%v); the server was asked to cancel the statement, which may have committed", e.ctxErr)
}

func (e *statementAbandonedError) Unwrap() error { return e.ctxErr }

// Timeout reports, like a net.Error, whether the context ended by its
// deadline.
func (e *statementAbandonedError) Timeout() bool {
	return errors.Is(e.ctxErr, context.DeadlineExceeded)
}

// cancelRetry is the first pause before a cancel request is sent again.
const cancelRetry = 20 * time.Millisecond

// statementResult is what a statement run in the background returned.
type statementResult[T any] struct {
	value T
	err   error
}

// runStatement runs stmt on a connection of pool, as described above. Once
// the caller has been answered, late (when not nil) receives the
// statement's own result, so that a write that committed after all still
// reaches the cache and the notifications.
func runStatement[T any](ctx context.Context, pool *pgxpool.Pool, stmt func(context.Context, db.DBTX) (T, error), late func(T, error)) (T, error) {
	var zero T
	conn, err := pool.Acquire(ctx) // a deadline passing here sends nothing
	if err != nil {
		return zero, err
	}
	if ctx.Done() == nil { // nothing can interrupt it
		v, err := stmt(ctx, conn)
		release(conn)
		return v, err
	}
	stmtCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan statementResult[T], 1)
	go func() {
		v, err := stmt(stmtCtx, conn)
		done <- statementResult[T]{v, err}
	}()
	select {
	case r := <-done:
		stop()
		release(conn)
		return r.value, r.err
	case <-ctx.Done():
	}
	select {
	case r := <-done: // finished as the context ended: the result is known
		stop()
		release(conn)
		return r.value, r.err
	default:
	}
	go finishAbandoned(conn, done, stop, late)
	return zero, &statementAbandonedError{ctxErr: ctx.Err()}
}

// finishAbandoned cancels a statement whose caller has gone, waits for its
// end, and gives its connection back to the pool.
func finishAbandoned[T any](conn *pgxpool.Conn, done <-chan statementResult[T], stop context.CancelFunc, late func(T, error)) {
	defer stop()
	pgConn := conn.Conn().PgConn()
	giveUp := time.After(DefaultCancelDeadlineDelay)
	var r statementResult[T]
	var cancelled bool // a cancel request reached the server
	// A cancel request that reaches the backend while it still waits for
	// the statement is ignored: send another while the statement runs on,
	// at growing intervals.
	for retry := cancelRetry; ; retry *= 2 {
		cancelCtx, cancel := context.WithTimeout(context.Background(), DefaultCancelDeadlineDelay)
		cancelled = pgConn.CancelRequest(cancelCtx) == nil || cancelled
		cancel()
		select {
		case r = <-done:
		case <-time.After(retry):
			continue
		case <-giveUp:
			stop() // the pool's context watcher interrupts the statement
			r = <-done
		}
		break
	}
	var pgErr *pgconn.PgError
	if cancelled && !conn.Conn().IsClosed() && !(errors.As(r.err, &pgErr) && pgErr.Code == pgerrcode.QueryCanceled) {
		// The statement ended before the cancel reached it. The signal
		// may still be on its way to the backend: let it fall on a
		// statement of no consequence, not on the next caller's.
		ctx, cancel := context.WithTimeout(context.Background(), DefaultCancelDeadlineDelay)
		_, _ = pgConn.Exec(ctx, "SELECT 1").ReadAll()
		cancel()
	}
	release(conn)
	if late != nil {
		late(r.value, r.err)
	}
}
