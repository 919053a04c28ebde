package remotestorage

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// sideConn is a manager's connection for its own background statements
// (notifications, the cache's poll): opened on first use, as the
// pool opens its connections, but tracing only the connect, not the
// statements (they are not the caller's), and never
// taking a connection the callers' pool may be short of. One statement at
// a time; a failed statement closes it, the next use reopens it.
type sideConn struct {
	pool *pgxpool.Pool

	mu   sync.Mutex
	conn *pgx.Conn
}

func (c *sideConn) do(ctx context.Context, f func(conn *pgx.Conn) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil || c.conn.IsClosed() {
		cfg := c.pool.Config().ConnConfig.Copy()
		cfg.Tracer = connectTracerOf(cfg.Tracer)
		conn, err := connectLikePool(ctx, c.pool, cfg)
		if err != nil {
			return err
		}
		c.conn = conn
	}
	if err := f(c.conn); err != nil {
		c.conn.Close(context.Background())
		c.conn = nil
		return err
	}
	return nil
}

func (c *sideConn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		c.conn.Close(context.Background())
		c.conn = nil
	}
}
