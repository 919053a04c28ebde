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

// The baseline moves only a database of the pre-release chain at its last
// version: one at an older pre-release version is refused, naming its
// version, and left exactly as it was.
func TestBaselineRefusesAnOlderPreReleaseDatabase(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := emptyPool(t)
	// What the pre-release chain leaves at 12: goose's version table and
	// the data tables (one stands for them: the baseline looks for it).
	_, err := pool.Exec(ctx, `
CREATE TABLE `+migrations.VersionTable+` (id serial PRIMARY KEY, version_id bigint NOT NULL, is_applied boolean NOT NULL, tstamp timestamp DEFAULT now());
INSERT INTO `+migrations.VersionTable+` (version_id, is_applied) SELECT v, true FROM generate_series(0, 12) v WHERE v NOT IN (3, 8, 9);
CREATE TABLE rlmm_segments (topic_id uuid, note text);
INSERT INTO rlmm_segments VALUES (gen_random_uuid(), 'kept');`)
	require.NoError(t, err)

	err = rs.Migrate(ctx, pool)
	require.ErrorContains(t, err, "pre-release version 12")
	require.ErrorContains(t, err, "migrate it to 18 with the code of the pre-release chain first")

	var version int64
	var columns, rows int
	var partitions bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT max(version_id) FROM `+migrations.VersionTable+` WHERE is_applied),
		(SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'rlmm_segments'),
		(SELECT count(*) FROM rlmm_segments WHERE note = 'kept'),
		to_regclass('rlmm_partitions') IS NOT NULL`).Scan(&version, &columns, &rows, &partitions))
	require.Equal(t, int64(12), version, "no version recorded")
	require.Equal(t, 2, columns, "the table untouched")
	require.Equal(t, 1, rows, "the row kept")
	require.False(t, partitions, "nothing of the baseline created")
	_, err = rs.NewPgManager(ctx, pool)
	require.ErrorIs(t, err, rs.ErrSchemaMismatch)
	require.ErrorContains(t, err, "pre-release version 12")
}
