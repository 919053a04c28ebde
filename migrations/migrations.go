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
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed *.sql
var files embed.FS

// FS is the embedded migration files.
func FS() fs.FS { return files }

// VersionTable is the goose version table of this project.
const VersionTable = "rlmm_goose_db_version"

// LockTable is the table of goose's table-based locker, which serialises
// concurrent migrations. A row lock with a lease works through a transaction
// pooler (PgBouncer pool_mode=transaction), where a session advisory lock
// would be taken on one server connection and released on another.
const LockTable = "rlmm_goose_lock"

// lockID is the row of LockTable that serialises concurrent migrations.
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
// the project's version table, no global registry, and goose's table-based
// lock (LockTable) so that brokers migrating at the same moment serialise,
// also behind a transaction pooler.
func NewProvider(db *sql.DB) (*goose.Provider, error) {
	return NewProviderFS(db, files)
}

// NewProviderFS is NewProvider over other migration files, for tests of a
// schema change (a next migration that is not shipped).
func NewProviderFS(db *sql.DB, fsys fs.FS) (*goose.Provider, error) {
	locker, err := newLocker()
	if err != nil {
		return nil, err
	}
	return goose.NewProvider(goose.DialectPostgres, db, fsys,
		goose.WithTableName(VersionTable),
		goose.WithDisableGlobalRegistry(true),
		goose.WithLocker(locker),
	)
}

// newLocker returns goose's table-based locker on LockTable. A waiting
// broker retries every 100 ms for up to 5 minutes (goose's default retries
// every 5 s); the lease of 30 s, renewed every 5 s, frees the lock of a
// broker that died holding it.
func newLocker() (lock.Locker, error) {
	return lock.NewPostgresTableLocker(
		lock.WithTableName(LockTable),
		lock.WithTableLockID(lockID),
		lock.WithTableLockTimeout(100*time.Millisecond, 3000),
		lock.WithTableUnlockTimeout(100*time.Millisecond, 600),
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
