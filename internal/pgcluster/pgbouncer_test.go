package pgcluster_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage/internal/pgcluster"
)

// A PgBouncer in transaction mode in front of a cluster: clients reach any
// database through it, consecutive transactions of one client may run on
// different server connections, and Stop stops it and removes its files.
func TestBouncer(t *testing.T) {
	t.Parallel()
	c := start(t, pgcluster.Options{})
	b, err := pgcluster.StartBouncer(context.Background(), pgcluster.BouncerOptions{
		Host: c.SocketDir(), Port: c.Port(), User: "postgres",
	})
	require.NoError(t, err)
	dir := filepath.Dir(b.LogFile())
	t.Cleanup(func() { require.NoError(t, b.Stop()) })

	ctx := t.Context()
	conn, err := pgx.Connect(ctx, b.URL("postgres")+"&default_query_exec_mode=exec")
	require.NoError(t, err)
	defer conn.Close(ctx)
	var mode string
	// SHOW runs on the server: the pooler forwards it.
	require.NoError(t, conn.QueryRow(ctx, "SHOW server_version_num").Scan(&mode))
	require.NotEmpty(t, mode)
	// A session setting does not outlive its transaction's server
	// connection in transaction mode, so the pooler is in the way.
	other, err := pgx.Connect(ctx, b.URL("postgres")+"&default_query_exec_mode=exec")
	require.NoError(t, err)
	defer other.Close(ctx)
	tx, err := other.Begin(ctx) // holds a server connection
	require.NoError(t, err)
	var pidA, pidB int
	require.NoError(t, tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pidA))
	require.NoError(t, conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pidB))
	require.NotEqual(t, pidA, pidB)
	require.NoError(t, tx.Rollback(ctx))

	require.NoError(t, b.Stop())
	require.NoError(t, b.Stop(), "idempotent")
	_, err = os.Stat(dir)
	require.True(t, os.IsNotExist(err), "the bouncer's directory is removed")
	_, err = pgx.Connect(ctx, b.URL("postgres"))
	require.Error(t, err, "stopped")
}

// A missing binary fails at once, naming it.
func TestBouncerMissingBinary(t *testing.T) {
	t.Parallel()
	_, err := pgcluster.StartBouncer(context.Background(), pgcluster.BouncerOptions{
		Host: "/nonexistent", Port: 5432, User: "postgres", Binary: "/nonexistent/pgbouncer",
	})
	require.ErrorContains(t, err, "pgbouncer binary /nonexistent/pgbouncer is missing")
}
