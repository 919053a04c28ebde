package rstest

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/krabka/remotestorage/internal/plancheck"
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
	last []plancheck.Statement
}

// Take returns the statements counted since the last Take, and the queries
// among them (none with CountOnly), and starts counting again from zero.
func (c *StatementCounter) Take() (int64, []plancheck.Statement) {
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
	c.last = append(c.last, plancheck.Statement{SQL: data.SQL, Args: data.Args})
	c.mu.Unlock()
	return ctx
}

// TraceBatchStart, TracePrepareStart and TraceCopyFromStart count a batch
// (once, whatever it holds), a prepare and a copy.
func (c *StatementCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return c.count(ctx)
}

func (c *StatementCounter) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	return c.count(ctx)
}

func (c *StatementCounter) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	return c.count(ctx)
}

func (c *StatementCounter) count(ctx context.Context) context.Context {
	c.n.Add(1)
	return ctx
}

// The rest of the tracer interfaces: nothing to count.

func (c *StatementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData)       {}
func (c *StatementCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData)   {}
func (c *StatementCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)       {}
func (c *StatementCounter) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData)   {}
func (c *StatementCounter) TraceCopyFromEnd(context.Context, *pgx.Conn, pgx.TraceCopyFromEndData) {}

// The tracer interfaces of pgx it implements, checked.
var (
	_ pgx.QueryTracer    = (*StatementCounter)(nil)
	_ pgx.BatchTracer    = (*StatementCounter)(nil)
	_ pgx.PrepareTracer  = (*StatementCounter)(nil)
	_ pgx.CopyFromTracer = (*StatementCounter)(nil)
)
