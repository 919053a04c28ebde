// Helpers shared by the pgcluster tests.

package pgcluster_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage/internal/pgcluster"
	"github.com/krabka/remotestorage/internal/testwait"
)

// start starts a cluster with opts, stopped when the test ends.
func start(t *testing.T, opts pgcluster.Options) *pgcluster.Cluster {
	t.Helper()
	c, err := pgcluster.Start(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Stop()) })
	return c
}

// queryInt runs sql, which returns one integer, on dsn.
func queryInt(t *testing.T, dsn, sql string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(t))
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int
	require.NoError(t, conn.QueryRow(ctx, sql).Scan(&n))
	return n
}
