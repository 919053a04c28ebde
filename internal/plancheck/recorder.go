package plancheck

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Querier is what sqlc's generated code runs its statements on (its DBTX):
// a pool, a connection or a transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Statement is one statement as it was sent: its text and its arguments.
type Statement struct {
	SQL  string
	Args []any
}

// Recorder is a Querier that records every statement it passes on to the
// one it wraps, so that a test can run code and then explain what it sent.
type Recorder struct {
	Querier
	mu   sync.Mutex
	sent []Statement
}

// NewRecorder records the statements sent through it to q.
func NewRecorder(q Querier) *Recorder { return &Recorder{Querier: q} }

func (r *Recorder) record(sql string, args []any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, Statement{SQL: sql, Args: args})
}

// Exec records and runs sql.
func (r *Recorder) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	r.record(sql, args)
	return r.Querier.Exec(ctx, sql, args...)
}

// Query records and runs sql.
func (r *Recorder) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	r.record(sql, args)
	return r.Querier.Query(ctx, sql, args...)
}

// QueryRow records and runs sql.
func (r *Recorder) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	r.record(sql, args)
	return r.Querier.QueryRow(ctx, sql, args...)
}

// Take returns the statements recorded since the last Take.
func (r *Recorder) Take() []Statement {
	r.mu.Lock()
	defer r.mu.Unlock()
	sent := r.sent
	r.sent = nil
	return sent
}
