package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	rs "github.com/krabka/remotestorage"
)

// TestConnectBackoffBoundsAttempts hammers a server that refuses every
// connection with eight callers for two seconds, through a pool set up by
// ConfigurePool and through a plain one: the first's attempts are bounded
// by the backoff, and every error says nothing was sent.
func TestConnectBackoffBoundsAttempts(t *testing.T) {
	noLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now: refused

	hammer := func(configure bool) (dials int64) {
		cfg, err := pgxpool.ParseConfig("postgres://rlmm@" + addr + "/rlmm?sslmode=disable")
		require.NoError(t, err)
		cfg.MaxConns = 4
		var mu sync.Mutex
		dial := cfg.ConnConfig.DialFunc
		cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			mu.Lock()
			dials++
			mu.Unlock()
			return dial(ctx, network, addr)
		}
		if configure {
			rs.ConfigurePool(cfg)
		}
		pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
		require.NoError(t, err)
		defer pool.Close()
		// The callers report what is wrong; the test goroutine asserts.
		var g errgroup.Group
		for range 8 {
			g.Go(func() error {
				for start := time.Now(); time.Since(start) < 2*time.Second; {
					ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
					_, err := pool.Exec(ctx, "SELECT 1")
					cancel()
					if err == nil {
						return errors.New("a query succeeded on a server that refuses every connection")
					}
					if rs.OutcomeUnknown(err) {
						return fmt.Errorf("a refused connection reports an unknown outcome: %w", err)
					}
					time.Sleep(5 * time.Millisecond) // a caller's retry interval
				}
				return nil
			})
		}
		require.NoError(t, g.Wait(), "configured %v", configure)
		mu.Lock()
		defer mu.Unlock()
		return dials
	}
	backedOff, plain := hammer(true), hammer(false)
	t.Logf("refused for 2 s, 8 callers retrying every 5 ms: %d connection attempts with ConfigurePool, %d without", backedOff, plain)
	require.LessOrEqual(t, backedOff, dialBound(1, 4, 2*time.Second))
	require.Greater(t, plain, 10*backedOff)
}
