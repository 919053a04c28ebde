package rstest

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgcluster"
)

// PrimaryAndStandby starts a primary with a migrated database "rlmm" and a
// streaming hot standby of it (clusters of their own, package pgcluster,
// stopped when the test ends), and returns pools on both and the standby.
func PrimaryAndStandby(t testing.TB) (primary, standby *pgxpool.Pool, standbyCluster *pgcluster.Cluster) {
	t.Helper()
	ctx := t.Context()
	p, err := pgcluster.Start(ctx, pgcluster.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Stop()) })
	admin, err := pgxpool.New(ctx, p.URL("postgres"))
	require.NoError(t, err)
	_, err = admin.Exec(ctx, "CREATE DATABASE rlmm")
	admin.Close()
	require.NoError(t, err)
	primary, err = pgxpool.New(ctx, p.URL("rlmm"))
	require.NoError(t, err)
	t.Cleanup(primary.Close)
	require.NoError(t, rs.Migrate(ctx, primary))

	s, err := pgcluster.StartStandby(ctx, p, pgcluster.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Stop()) }) // runs before the primary's Stop
	standby, err = pgxpool.New(ctx, s.URL("rlmm"))
	require.NoError(t, err)
	t.Cleanup(standby.Close)
	var inRecovery bool
	require.NoError(t, standby.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery))
	require.True(t, inRecovery, "the standby is a standby")
	return primary, standby, s
}
