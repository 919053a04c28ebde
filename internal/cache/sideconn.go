package cache

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SideConn is a manager's connection for its own background statements
// (notifications, the cache's poll): opened on first use, as the
// pool opens its connections, but tracing only the connect, not the
// statements (they are not the caller's), and never
// taking a connection the callers' pool may be short of. One statement at
// a time; a failed statement closes it, the next use reopens it.
type SideConn struct {
	pool *pgxpool.Pool

	mu   sync.Mutex
	conn *pgx.Conn
}

// NewSideConn returns the side connection of the manager whose primary is
// pool. It connects on first use.
func NewSideConn(pool *pgxpool.Pool) *SideConn { return &SideConn{pool: pool} }

// Do runs f on the connection, opening it first when it is not open.
func (c *SideConn) Do(ctx context.Context, f func(conn *pgx.Conn) error) error {
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

// Close closes the connection, if open.
func (c *SideConn) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		c.conn.Close(context.Background())
		c.conn = nil
	}
}
