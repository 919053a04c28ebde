package rstest

import (
	"context"
	"io/fs"
	"math"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/krabka/remotestorage/migrations"
)

// MigrateFS is rs.Migrate over other migration files, fsys: the embedded
// ones plus test-only next migrations, say.
func MigrateFS(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS) error {
	return MigrateFSTo(ctx, pool, fsys, math.MaxInt64)
}

// MigrateFSTo is MigrateFS up to version target only. Like rs.Migrate, it
// opens connections of its own with pool's connection settings.
func MigrateFSTo(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS, target int64) error {
	sqlDB := stdlib.OpenDB(*pool.Config().ConnConfig.Copy())
	defer sqlDB.Close()
	return migrations.UpToFS(ctx, sqlDB, fsys, target)
}
