package remotestorage

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/krabka/remotestorage/migrations"
)

// SchemaVersion is the schema version this code expects: the newest of the
// embedded migrations.
var SchemaVersion = migrations.Latest()

// Migrate applies the embedded goose migrations to the database (in the
// first schema of the connection's search_path). It is idempotent, and
// concurrent calls from several brokers serialise on goose's table-based
// lock (a row of rlmm_goose_lock with a lease), which also works behind a
// transaction pooler such as PgBouncer in transaction mode.
//
// It opens connections of its own with the pool's connection settings
// (goose holds one while its lock needs others), and closes them before it
// returns, so a busy or small pool cannot deadlock it.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	sqlDB := stdlib.OpenDB(*pool.Config().ConnConfig.Copy())
	defer sqlDB.Close()
	if err := migrations.Up(ctx, sqlDB); err != nil {
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
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
		return 0, nil
	}
	return version, err
}

// checkSchemaVersion fails unless the database is migrated to exactly
// SchemaVersion.
func checkSchemaVersion(ctx context.Context, pool *pgxpool.Pool) error {
	version, err := appliedSchemaVersion(ctx, pool)
	if err != nil {
		return ioError(ctx, err, "read the schema version")
	}
	switch {
	case version == 0:
		return fmt.Errorf("remotestorage: the database has no remotestorage schema (version table %s not found or empty); run remotestorage.Migrate or `rlmmctl migrate up` first", migrations.VersionTable)
	case version < SchemaVersion:
		return fmt.Errorf("remotestorage: the database schema is at version %d, this code needs %d; run remotestorage.Migrate or `rlmmctl migrate up`", version, SchemaVersion)
	case version > SchemaVersion:
		return fmt.Errorf("remotestorage: the database schema is at version %d, newer than this code's %d; upgrade the library (or migrate the database down)", version, SchemaVersion)
	}
	return nil
}
