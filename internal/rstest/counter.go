package rstest

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// StatementCounter is a pgx tracer (pgx.ConnConfig's Tracer) that counts the
// statements a pool sends: each query, batch, prepare or copy is at least
// one round trip. It also keeps each query's text and arguments, unless
// CountOnly is set, so that a benchmark's counter does not grow.
type StatementCounter struct {
	// CountOnly keeps no queries; set it before the pool is used.
	CountOnly bool

	n    atomic.Int64
	mu   sync.Mutex
	last []RecordedQuery
}

// RecordedQuery is a query a StatementCounter kept.
type RecordedQuery struct {
	SQL  string
	Args []any
}

// Take returns the statements counted since the last Take, and the queries
// among them (none with CountOnly), and starts counting again from zero.
func (c *StatementCounter) Take() (int64, []RecordedQuery) {
	c.mu.Lock()
	defer c.mu.Unlock()
	last := c.last
	c.last = nil
	return c.n.Swap(0), last
}

// TraceQueryStart counts a query and, without CountOnly, keeps it.
func (c *StatementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	if c.CountOnly {
		return ctx
	}
	c.mu.Lock()
	c.last = append(c.last, RecordedQuery{SQL: data.SQL, Args: data.Args})
	c.mu.Unlock()
	return ctx
}

// TraceQueryEnd does nothing.
func (c *StatementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart counts a batch.
func (c *StatementCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}

// TraceBatchQuery does nothing.
func (c *StatementCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd does nothing.
func (c *StatementCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// TracePrepareStart counts a prepare.
func (c *StatementCounter) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	c.n.Add(1)
	return ctx
}

// TracePrepareEnd does nothing.
func (c *StatementCounter) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}

// TraceCopyFromStart counts a copy.
func (c *StatementCounter) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	c.n.Add(1)
	return ctx
}

// TraceCopyFromEnd does nothing.
func (c *StatementCounter) TraceCopyFromEnd(context.Context, *pgx.Conn, pgx.TraceCopyFromEndData) {}

// The interfaces a pgx tracer may implement, checked.
var (
	_ pgx.QueryTracer    = (*StatementCounter)(nil)
	_ pgx.BatchTracer    = (*StatementCounter)(nil)
	_ pgx.PrepareTracer  = (*StatementCounter)(nil)
	_ pgx.CopyFromTracer = (*StatementCounter)(nil)
)
