package remotestorage

import (
	"context"
	"errors"
	"io/fs"
	"math"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/krabka/remotestorage/migrations"
)

// SchemaVersion is the schema version this code expects: the number of the
// newest embedded migration (a test fails when they differ).
const SchemaVersion int64 = 19

// Migrate applies the embedded goose migrations to the database (in the
// first schema of the connection's search_path). It is idempotent, and
// concurrent calls from several brokers serialise on goose's table-based
// lock (a row of rlmm_goose_lock with a lease), which also works behind a
// transaction pooler such as PgBouncer in transaction mode.
//
// Each migration runs as docs/MIGRATIONS.md ("Migrations under live
// brokers") describes: behind a prelude that locks the data tables in the
// brokers' order, retried when refused its locks, so brokers keep serving.
// On a database with nothing to do it only reads, so a broker's
// least-privilege role (rlmmctl roles sql) may call it at start.
//
// It opens connections of its own with the pool's connection settings
// (goose holds one while its lock needs others), and closes them before it
// returns, so a busy or small pool cannot deadlock it.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	if err := checkServerVersion(ctx, pool); err != nil {
		return err
	}
	return migrateFS(ctx, pool, migrations.FS())
}

func migrateFS(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS) error {
	return migrateFSTo(ctx, pool, fsys, math.MaxInt64)
}

// migrateFSTo applies the migrations of fsys up to version target.
func migrateFSTo(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS, target int64) error {
	sqlDB := stdlib.OpenDB(*pool.Config().ConnConfig.Copy())
	defer sqlDB.Close()
	if err := migrations.UpToFS(ctx, sqlDB, fsys, target); err != nil {
		return ioError(ctx, err, "migrate")
	}
	return nil
}

// appliedSchemaVersion returns the newest migration applied to the
// database, 0 when none (no version table).
func appliedSchemaVersion(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var version int64
	err := pool.QueryRow(ctx, "SELECT coalesce(max(version_id), 0) FROM "+pgx.Identifier{migrations.VersionTable}.Sanitize()+" WHERE is_applied").Scan(&version)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UndefinedTable {
		return 0, nil
	}
	return version, err
}

// checkSchemaVersion fails with ErrSchemaMismatch unless the database is
// migrated to SchemaVersion, or to a newer version every migration past
// SchemaVersion of which declared code of SchemaVersion still compatible
// ("-- rlmm:compatible-with N" with N <= SchemaVersion, recorded by Migrate
// in rlmm_schema_compat): the rule of rolling upgrades, docs/MIGRATIONS.md.
func checkSchemaVersion(ctx context.Context, pool *pgxpool.Pool) error {
	version, err := appliedSchemaVersion(ctx, pool)
	if err != nil {
		return ioError(ctx, err, "read the schema version")
	}
	switch {
	case version == 0:
		return newError(ErrSchemaMismatch, "the database has no remotestorage schema (version table %s not found or empty); run remotestorage.Migrate or `rlmmctl migrate up` first", migrations.VersionTable)
	case version < migrations.Baseline:
		return newError(ErrSchemaMismatch, "the database schema is at pre-release version %d, this code needs %d (release %d); run remotestorage.Migrate or `rlmmctl migrate up`, which moves a database at %d onto release 1's baseline (an older one must reach %d with pre-release code first; see docs/MIGRATIONS.md)", version, SchemaVersion, migrations.ReleaseOf(migrations.Baseline), migrations.Baseline-1, migrations.Baseline-1)
	case version < SchemaVersion:
		return newError(ErrSchemaMismatch, "the database schema is at version %d, this code needs %d; run remotestorage.Migrate or `rlmmctl migrate up`", version, SchemaVersion)
	case version > SchemaVersion:
		blocker, err := incompatibleMigration(ctx, pool, SchemaVersion)
		if err != nil {
			return ioError(ctx, err, "read the schema's compatibility")
		}
		if blocker != 0 {
			return newError(ErrSchemaMismatch, "the database schema is at version %d, newer than this code's %d, and migration %d does not declare code of schema %d compatible (no \"-- rlmm:compatible-with\" line naming %d or older); upgrade this broker's library to one with schema %d or newer before migrating further (see docs/MIGRATIONS.md), or migrate the database down", version, SchemaVersion, blocker, SchemaVersion, SchemaVersion, version)
		}
	}
	return nil
}

// incompatibleMigration returns the first applied migration newer than
// code that does not declare code's schema still compatible, 0 when none.
func incompatibleMigration(ctx context.Context, pool *pgxpool.Pool, code int64) (int64, error) {
	versions := pgx.Identifier{migrations.VersionTable}.Sanitize()
	var blocker int64
	err := pool.QueryRow(ctx, `SELECT coalesce(min(v.version_id), 0) FROM `+versions+` v
		LEFT JOIN `+pgx.Identifier{migrations.CompatTable}.Sanitize()+` c ON c.version = v.version_id
		WHERE v.is_applied AND v.version_id > $1 AND (c.oldest_compatible_code IS NULL OR c.oldest_compatible_code > $1)`, code).Scan(&blocker)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UndefinedTable {
		// No declarations recorded (a database migrated by the goose CLI,
		// or by a library older than them): nothing is declared compatible.
		err = pool.QueryRow(ctx, "SELECT min(version_id) FROM "+versions+" WHERE is_applied AND version_id > $1", code).Scan(&blocker)
	}
	return blocker, err
}
