package remotestorage

import (
	"context"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"
)

// MigrateFS is Migrate over other migration files: the embedded ones plus a
// test-only next migration, for the rolling-upgrade test.
func MigrateFS(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS) error {
	return migrateFS(ctx, pool, fsys)
}
