package remotestorage_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/logtest"
	"github.com/krabka/remotestorage/internal/pgtest"
)

// serverOf starts a throwaway server of PostgreSQL major (the embedded
// binaries, or the system's with RLMM_PG_SERVER=system) and returns a pool
// on its maintenance database and the server's version text.
func serverOf(t *testing.T, major int) (*pgxpool.Pool, string) {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), pgtest.NewServerOf(t, major))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	var version string
	require.NoError(t, pool.QueryRow(t.Context(), "SHOW server_version").Scan(&version))
	require.True(t, strings.HasPrefix(version, fmt.Sprint(major)+"."), version)
	return pool, version
}

const untestedWarning = "older than 15, the oldest version tested"

// On a server older than MinServerVersion (12: no xid8) the schema cannot
// work: Migrate and NewPgManager refuse it, naming its version and the
// oldest that works, and change nothing.
func TestServerTooOldIsRefused(t *testing.T) {
	t.Parallel()
	require.Equal(t, 13, rs.MinServerVersion)
	pool, version := serverOf(t, 12)
	ctx := t.Context()
	err := rs.Migrate(ctx, pool)
	require.ErrorIs(t, err, rs.ErrServerVersion)
	require.ErrorContains(t, err, "the server runs PostgreSQL "+version+"; the schema needs PostgreSQL 13 or newer (tested on 15 and newer)")
	var tables int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&tables))
	require.Zero(t, tables, "Migrate created tables on a server it refused")

	_, err = rs.NewPgManager(ctx, pool)
	require.ErrorIs(t, err, rs.ErrServerVersion)
	require.ErrorContains(t, err, "PostgreSQL "+version)
}

// On 13 and 14 the schema works but the tests do not run: Migrate and
// NewPgManager go on, each logging one warning that names the server's
// version and the oldest tested. Migrate logs through slog's default
// logger, so the test swaps it and does not run in parallel.
func TestUntestedServerWarnsOnce(t *testing.T) {
	var migrateLog logtest.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&migrateLog, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })

	for _, major := range []int{13, 14} {
		t.Run(fmt.Sprint(major), func(t *testing.T) {
			pool, version := serverOf(t, major)
			ctx := t.Context()
			before := strings.Count(migrateLog.String(), untestedWarning)
			require.NoError(t, rs.Migrate(ctx, pool))
			logged := migrateLog.String()
			require.Equal(t, before+1, strings.Count(logged, untestedWarning), logged)
			require.Contains(t, logged, "the server runs PostgreSQL "+version+", older than 15")

			var managerLog logtest.Buffer
			m, err := rs.NewPgManager(ctx, pool, rs.WithLogger(slog.New(slog.NewTextHandler(&managerLog, nil))))
			require.NoError(t, err)
			m.Close()
			require.Equal(t, 1, strings.Count(managerLog.String(), untestedWarning), managerLog.String())
			require.Contains(t, managerLog.String(), "level=WARN")
			require.Contains(t, managerLog.String(), "PostgreSQL "+version)
		})
	}
}

// A tested server starts without the warning.
func TestTestedServerDoesNotWarn(t *testing.T) {
	t.Parallel()
	var log logtest.Buffer
	m, err := rs.NewPgManager(t.Context(), pgtest.NewPool(t), rs.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	require.NoError(t, err)
	m.Close()
	require.NotContains(t, log.String(), untestedWarning)
}
