package reliability_test

// Where a test's database comes from: the shared test server, or a
// cluster of its own for the tests that take the server down.

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgcluster"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/testwait"
)

// noLeaks checks, when the test and its cleanups are done, that no goroutine
// started during the test is still running. Call it first in a test that is
// not parallel, after anything long-lived the test binary keeps (the shared
// server) has started.
func noLeaks(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// sharedDatabase returns a DSN for a new migrated database on the shared
// test server, and starts the leak check.
func sharedDatabase(t *testing.T) string {
	t.Helper()
	pgtest.Server(t)
	noLeaks(t)
	return pgtest.NewDatabase(t)
}

// ownCluster starts a cluster for this test alone (it will be stopped,
// crashed, restarted), creates a migrated database "rlmm" in it and returns
// the cluster and the database's DSN. The leak check starts first, so the
// cluster is stopped before it runs.
func ownCluster(t *testing.T, opts pgcluster.Options) (*pgcluster.Cluster, string) {
	t.Helper()
	noLeaks(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*testwait.Timeout(t))
	defer cancel()
	c, err := pgcluster.Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Stop()) })
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE DATABASE rlmm")
	require.NoError(t, conn.Close(ctx))
	require.NoError(t, err)
	dsn := c.URL("rlmm")
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	defer pool.Close()
	require.NoError(t, rs.Migrate(ctx, pool))
	return c, dsn
}
