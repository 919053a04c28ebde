// Package migrations holds the goose migrations of the remotestorage schema,
// embedded, and applies them through a goose Provider.
//
// The files also work unchanged with the goose CLI:
//
//	goose -dir migrations -table rlmm_goose_db_version postgres "$DATABASE_URL" up
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed *.sql
var files embed.FS

// FS is the embedded migration files.
func FS() fs.FS { return files }

// VersionTable is the goose version table of this project.
const VersionTable = "rlmm_goose_db_version"

// lockID is the advisory lock key that serialises concurrent migrations.
const lockID = 0x726c6d6d // "rlmm"

// Latest is the schema version this code expects.
func Latest() int64 {
	entries, _ := fs.Glob(files, "*.sql")
	var latest int64
	for _, name := range entries {
		var v int64
		if _, err := fmt.Sscanf(name, "%d_", &v); err == nil && v > latest {
			latest = v
		}
	}
	return latest
}

// NewProvider returns a goose provider over db with the embedded migrations,
// the project's version table, no global registry, and a session lock so
// that brokers migrating at the same moment serialise.
func NewProvider(db *sql.DB) (*goose.Provider, error) {
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(lockID))
	if err != nil {
		return nil, err
	}
	return goose.NewProvider(goose.DialectPostgres, db, files,
		goose.WithTableName(VersionTable),
		goose.WithDisableGlobalRegistry(true),
		goose.WithSessionLocker(locker),
	)
}

// Up applies every pending migration. It is idempotent.
func Up(ctx context.Context, db *sql.DB) error {
	p, err := NewProvider(db)
	if err != nil {
		return err
	}
	_, err = p.Up(ctx)
	return err
}
