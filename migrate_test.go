package remotestorage_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/migrations"
)

// Brokers migrating the same empty database at once serialise on the
// advisory lock: every call succeeds, each migration applies once, and a
// later call is a no-op.
func TestMigrateConcurrentAndIdempotent(t *testing.T) {
	t.Parallel()
	pool := emptyPool(t)
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Go(func() { errs[i] = rs.Migrate(t.Context(), pool) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, rs.Migrate(t.Context(), pool))
	requireMigratedOnce(t, pool)
}

// NewPgManager refuses a database that is not at the schema version the code
// expects with ErrSchemaMismatch, and says what to run.
func TestNewPgManagerRefusesWrongSchema(t *testing.T) {
	t.Parallel()
	t.Run("not migrated", func(t *testing.T) {
		t.Parallel()
		_, err := rs.NewPgManager(t.Context(), emptyPool(t))
		require.ErrorIs(t, err, rs.ErrSchemaMismatch)
		require.ErrorContains(t, err, "no remotestorage schema")
		require.ErrorContains(t, err, "rlmmctl migrate up")
	})
	t.Run("older", func(t *testing.T) {
		t.Parallel()
		pool := emptyPool(t)
		require.NoError(t, rs.Migrate(t.Context(), pool))
		// What a database of the pre-release chain records: 18 applied.
		_, err := pool.Exec(t.Context(), "UPDATE "+migrations.VersionTable+" SET version_id = $1 WHERE version_id = $2", migrations.Baseline-1, migrations.Baseline)
		require.NoError(t, err)
		_, err = rs.NewPgManager(t.Context(), pool)
		require.ErrorIs(t, err, rs.ErrSchemaMismatch)
		require.ErrorContains(t, err, fmt.Sprintf("pre-release version %d, this code needs %d (release 1)", migrations.Baseline-1, rs.SchemaVersion))
		require.ErrorContains(t, err, "Migrate")
	})
	t.Run("newer", func(t *testing.T) {
		t.Parallel()
		pool := emptyPool(t)
		require.NoError(t, rs.Migrate(t.Context(), pool))
		_, err := pool.Exec(t.Context(), "INSERT INTO "+migrations.VersionTable+" (version_id, is_applied) VALUES ($1, true)", rs.SchemaVersion+1)
		require.NoError(t, err)
		_, err = rs.NewPgManager(t.Context(), pool)
		require.ErrorIs(t, err, rs.ErrSchemaMismatch)
		require.ErrorContains(t, err, "newer than this code")
	})
	t.Run("unreachable", func(t *testing.T) {
		t.Parallel()
		pool, err := pgxpool.New(t.Context(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=2")
		require.NoError(t, err)
		defer pool.Close()
		_, err = rs.NewPgManager(t.Context(), pool)
		require.ErrorIs(t, err, rs.ErrIO)
		require.NotErrorIs(t, err, rs.ErrSchemaMismatch)
	})
}

// TestSchemaVersionIsNewestMigration: the constant names the newest
// embedded migration, so a new migration cannot ship without it.
func TestSchemaVersionIsNewestMigration(t *testing.T) {
	t.Parallel()
	require.Equal(t, migrations.Latest(), rs.SchemaVersion, "SchemaVersion must be the number of the newest file in migrations/")
}
