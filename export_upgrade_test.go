package remotestorage

import (
	"context"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/krabka/remotestorage/migrations"
)

// MigrateFS is Migrate over other migration files: the embedded ones plus a
// test-only next migration, for the rolling-upgrade test.
func MigrateFS(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS) error {
	return migrateFS(ctx, pool, fsys)
}

// MigrateTo is Migrate up to version target only, for the test of each
// migration under brokers of the code before it.
func MigrateTo(ctx context.Context, pool *pgxpool.Pool, target int64) error {
	return migrateFSTo(ctx, pool, migrations.FS(), target)
}

// MigrateFSTo is MigrateFS up to version target only.
func MigrateFSTo(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS, target int64) error {
	return migrateFSTo(ctx, pool, fsys, target)
}
