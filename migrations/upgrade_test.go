package migrations_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/rstest"
	"github.com/krabka/remotestorage/internal/testwait"
	"github.com/krabka/remotestorage/migrations"
)

// expandMigration is a test-only expand migration: a column and an index,
// built without blocking writes, declared compatible with code of the
// current schema.
func expandMigration(compatibleWith int64) string {
	return fmt.Sprintf(`-- +goose NO TRANSACTION
-- rlmm:compatible-with %d
-- +goose Up
ALTER TABLE rlmm_segments ADD COLUMN upgrade_test_note text;
COMMENT ON COLUMN rlmm_segments.upgrade_test_note IS 'Test-only: the rolling-upgrade test''s expand migration.';
CREATE INDEX CONCURRENTLY rlmm_segments_upgrade_test_idx ON rlmm_segments (topic_id, partition, upgrade_test_note);
-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS rlmm_segments_upgrade_test_idx;
ALTER TABLE rlmm_segments DROP COLUMN IF EXISTS upgrade_test_note;
`, compatibleWith)
}

// A rolling upgrade: brokers running this code (schema SchemaVersion) keep
// serving reads and writes, under load, while Migrate applies the next
// migration, an expand one declared compatible; afterwards this code still
// starts on the newer schema.
func TestRollingUpgradeOldCodeServesWhileMigrating(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.NewDatabase(t)
	managers, admin := rstest.BrokersOn(t, dsn, 3)

	var (
		migrated atomic.Bool
		stop     = make(chan struct{})
		wg       sync.WaitGroup
		mu       sync.Mutex
		errs     []error
		before   atomic.Int64
		after    atomic.Int64
		started  = make(chan struct{})
		once     sync.Once
	)
	for b, m := range managers {
		wg.Go(func() {
			tp := rstest.TP(int32(b))
			for i := int64(0); ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				s := rstest.Segment(tp, i*10, i*10+9, map[rs.LeaderEpoch]int64{0: i * 10})
				err := m.AddRemoteLogSegmentMetadata(ctx, s)
				if err == nil {
					err = m.UpdateRemoteLogSegmentMetadata(ctx, rstest.Update(s, rs.CopySegmentFinished))
				}
				if err == nil {
					var got rs.RemoteLogSegmentMetadata
					var found bool
					got, found, err = m.RemoteLogSegmentMetadata(ctx, tp, 0, i*10+5)
					if err == nil && (!found || got.SegmentID != s.SegmentID || got.State != rs.CopySegmentFinished) {
						err = fmt.Errorf("broker %d: lookup of offset %d found %v %v", b, i*10+5, found, got.SegmentID)
					}
				}
				if err == nil {
					var list []rs.RemoteLogSegmentMetadata
					list, err = m.ListRemoteLogSegments(ctx, tp)
					if err == nil && int64(len(list)) != i+1 {
						err = fmt.Errorf("broker %d: list has %d segments, want %d", b, len(list), i+1)
					}
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				if migrated.Load() {
					after.Add(1)
				} else if before.Add(1) == 30 {
					once.Do(func() { close(started) })
				}
			}
		})
	}
	<-started
	next := withNext(t, expandMigration(rs.SchemaVersion))
	require.NoError(t, rstest.MigrateFS(ctx, admin, next))
	migrated.Store(true)
	testwait.Until(t, "the old brokers keep serving after the migration", func() bool {
		mu.Lock()
		failed := len(errs) > 0
		mu.Unlock()
		return failed || after.Load() >= 30
	})
	close(stop)
	wg.Wait()
	require.Empty(t, errs, "the old code failed while or after the next migration applied")
	t.Logf("old code served %d write-and-read rounds before and %d after the migration", before.Load(), after.Load())

	var version int64
	require.NoError(t, admin.QueryRow(ctx, "SELECT max(version_id) FROM "+migrations.VersionTable).Scan(&version))
	require.Equal(t, rs.SchemaVersion+1, version)
	var valid bool
	require.NoError(t, admin.QueryRow(ctx, `SELECT indisvalid FROM pg_index WHERE indexrelid = 'rlmm_segments_upgrade_test_idx'::regclass`).Scan(&valid))
	require.True(t, valid, "the index was built")

	// This code starts on the newer schema, which declares it compatible.
	m, err := rs.NewPgManager(ctx, admin)
	require.NoError(t, err)
	m.Close()
}

// NewPgManager refuses a newer schema unless every migration past its own
// declares it compatible, and says what to do.
func TestRollingUpgradeRefusesIncompatibleSchema(t *testing.T) {
	t.Parallel()
	freshPool := func(t *testing.T) *pgxpool.Pool { return rstest.NewPool(t, pgtest.NewDatabase(t), 0, false) }
	t.Run("no declaration", func(t *testing.T) {
		t.Parallel()
		pool := freshPool(t)
		undeclared := "-- +goose Up\nALTER TABLE rlmm_segments ADD COLUMN upgrade_test_note text;\n"
		require.NoError(t, rstest.MigrateFS(t.Context(), pool, withNext(t, undeclared)))
		_, err := rs.NewPgManager(t.Context(), pool)
		require.ErrorIs(t, err, rs.ErrSchemaMismatch)
		require.ErrorContains(t, err, fmt.Sprintf("migration %d does not declare code of schema %d compatible", rs.SchemaVersion+1, rs.SchemaVersion))
		require.ErrorContains(t, err, "upgrade this broker's library")
		require.ErrorContains(t, err, "docs/MIGRATIONS.md")
	})
	t.Run("a later migration drops compatibility", func(t *testing.T) {
		t.Parallel()
		pool := freshPool(t)
		contract := fmt.Sprintf("-- rlmm:compatible-with %d\n-- +goose Up\nALTER TABLE rlmm_segments DROP COLUMN upgrade_test_note;\n", rs.SchemaVersion+1)
		require.NoError(t, rstest.MigrateFS(t.Context(), pool, withNext(t, expandMigration(rs.SchemaVersion), contract)))
		_, err := rs.NewPgManager(t.Context(), pool)
		require.ErrorContains(t, err, fmt.Sprintf("migration %d does not declare", rs.SchemaVersion+2))
	})
	t.Run("a bad declaration", func(t *testing.T) {
		t.Parallel()
		pool := freshPool(t)
		bad := fmt.Sprintf("-- rlmm:compatible-with %d\n-- +goose Up\nSELECT 1;\n", rs.SchemaVersion+1)
		err := rstest.MigrateFS(t.Context(), pool, withNext(t, bad))
		require.ErrorContains(t, err, "it must name an older schema version")
		var version int64
		require.NoError(t, pool.QueryRow(t.Context(), "SELECT max(version_id) FROM "+migrations.VersionTable).Scan(&version))
		require.Equal(t, rs.SchemaVersion, version, "nothing applied")
	})
}

// A rolled-back migration leaves no declaration behind: after a Down of
// a next migration declared compatible, a different migration of the same
// number that declares nothing (here it renames a column this code writes)
// makes this code refuse the schema, rather than start and fail its first
// add. Whether the Down ran through the migrations' provider (rlmmctl
// migrate down) or other tooling that knows nothing of rlmm_schema_compat.
func TestDownForgetsCompatibility(t *testing.T) {
	t.Parallel()
	contract := "-- +goose Up\nALTER TABLE rlmm_segments RENAME COLUMN broker_id TO upgrade_test_broker;\n" +
		"-- +goose Down\nALTER TABLE rlmm_segments RENAME COLUMN upgrade_test_broker TO broker_id;\n"
	for _, down := range []string{"provider", "other tooling"} {
		t.Run(down, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			pool := rstest.NewPool(t, pgtest.NewDatabase(t), 0, false)
			require.NoError(t, rstest.MigrateFS(ctx, pool, withNext(t, expandMigration(rs.SchemaVersion))))
			m, err := rs.NewPgManager(ctx, pool)
			require.NoError(t, err, "the expand migration declares this code compatible")
			m.Close()

			switch down {
			case "provider":
				db := stdlib.OpenDBFromPool(pool)
				defer db.Close()
				p, err := migrations.NewProviderFS(db, withNext(t, expandMigration(rs.SchemaVersion)))
				require.NoError(t, err)
				_, err = p.Down(ctx)
				require.NoError(t, err)
				var rows int
				require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+migrations.CompatTable+" WHERE version = $1", rs.SchemaVersion+1).Scan(&rows))
				require.Zero(t, rows, "the Down removed the declaration of the migration it rolled back")
			case "other tooling":
				_, err := pool.Exec(ctx, fmt.Sprintf(`DROP INDEX rlmm_segments_upgrade_test_idx;
					ALTER TABLE rlmm_segments DROP COLUMN upgrade_test_note;
					DELETE FROM %s WHERE version_id = %d`, migrations.VersionTable, rs.SchemaVersion+1))
				require.NoError(t, err)
			}

			require.NoError(t, rstest.MigrateFS(ctx, pool, withNext(t, contract)))
			_, err = rs.NewPgManager(ctx, pool)
			require.ErrorIs(t, err, rs.ErrSchemaMismatch)
			require.ErrorContains(t, err, fmt.Sprintf("migration %d does not declare", rs.SchemaVersion+1))
		})
	}
}
