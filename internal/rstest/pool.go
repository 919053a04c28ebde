package rstest

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
)

// NewPool opens a pool on dsn, closed when the test ends. maxConns 0 keeps
// pgxpool's default size; configure sets the pool up with rs.ConfigurePool.
func NewPool(t testing.TB, dsn string, maxConns int, configure bool) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(t, err)
	if maxConns > 0 {
		cfg.MaxConns = int32(maxConns)
	}
	if configure {
		rs.ConfigurePool(cfg)
	}
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// ListenerOption gives the cache's listener a session connection straight
// to the server at direct (a DSN that bypasses the pooler).
func ListenerOption(t testing.TB, direct string) rs.Option {
	t.Helper()
	cfg, err := pgx.ParseConfig(direct)
	require.NoError(t, err)
	return rs.WithListenerConnConfig(cfg)
}
