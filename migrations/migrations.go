// Package migrations holds the goose migrations of the remotestorage schema,
// embedded, and applies them through a goose Provider.
//
// The files also work unchanged with the goose CLI:
//
//	goose -dir migrations -table rlmm_goose_db_version postgres "$DATABASE_URL" up
package migrations

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"math"
	"regexp"
	"strconv"
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

// Hash names the embedded migrations' content: 12 lowercase hex digits of
// a SHA-256 over every file's name, length and bytes. What is built under
// other migrations (pgtest's template database, rlmmbench's loaded
// databases) carries another hash and is not reused. The digits are safe
// in a PostgreSQL identifier.
func Hash() (string, error) {
	d, err := digest(math.MaxInt64)
	if err != nil {
		return "", err
	}
	return d[:12], nil
}

// digest is the SHA-256, in hex, over the name, length and bytes of every
// embedded migration up to version upTo.
func digest(upTo int64) (string, error) {
	h := sha256.New()
	err := fs.WalkDir(files, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		var v int64
		if _, err := fmt.Sscanf(path, "%d_", &v); err == nil && v > upTo {
			return nil
		}
		b, err := fs.ReadFile(files, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("migrations: hash: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// NewProvider returns a goose provider over db with the embedded migrations,
// the project's version table, no global registry, and goose's table-based
// lock (LockTable) so that brokers migrating at the same moment serialise,
// also behind a transaction pooler.
func NewProvider(db *sql.DB) (*goose.Provider, error) {
	return NewProviderFS(db, files)
}

// NewProviderFS is NewProvider over other migration files, for tests of a
// schema change (a next migration that is not shipped). The provider runs
// each migration as Migrate does (runner.go): a transactional one behind
// the prelude that takes the data tables' locks in the writers' order, and
// each keeps rlmm_schema_compat in step (a Down removes the row of the
// migration it rolls back). It does not retry a migration refused its
// locks: that is Up's work.
func NewProviderFS(db *sql.DB, fsys fs.FS) (*goose.Provider, error) {
	locker, err := newLocker()
	if err != nil {
		return nil, err
	}
	pfs, err := preparedFS(fsys)
	if err != nil {
		return nil, err
	}
	return goose.NewProvider(goose.DialectPostgres, db, pfs,
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

// Up applies every pending migration and records what each declares about
// compatibility (see Compatibility). It is idempotent. On a database with
// nothing to do it only reads: a role without write access to the version
// tables (a broker's) can call it.
func Up(ctx context.Context, db *sql.DB) error {
	return UpFS(ctx, db, files)
}

// UpFS is Up over other migration files, for tests of a schema change.
func UpFS(ctx context.Context, db *sql.DB, fsys fs.FS) error {
	return UpToFS(ctx, db, fsys, math.MaxInt64)
}

// UpToFS applies the pending migrations of fsys up to version target, the
// lowest first, each as runner.go describes, under goose's table lock.
func UpToFS(ctx context.Context, db *sql.DB, fsys fs.FS, target int64) (err error) {
	compat, err := Compatibility(fsys)
	if err != nil {
		return err
	}
	srcs, err := sources(fsys)
	if err != nil {
		return err
	}
	if done, err := upToDate(ctx, db, srcs, compat, target); err != nil {
		return fmt.Errorf("migrations: read the applied versions: %w", err)
	} else if done {
		return nil
	}
	locker, err := newLocker()
	if err != nil {
		return err
	}
	if err := locker.Lock(ctx, db); err != nil {
		return err
	}
	defer func() {
		if uerr := locker.Unlock(context.WithoutCancel(ctx), db); err == nil {
			err = uerr
		}
	}()
	if err := ensureCompatTable(ctx, db); err != nil {
		return err
	}
	applied, err := appliedVersions(ctx, db)
	if err != nil {
		return fmt.Errorf("migrations: read the applied versions: %w", err)
	}
	for _, s := range srcs {
		if s.version > target {
			break
		}
		if applied[s.version] {
			continue // under the lock: no other Migrate applies it meanwhile
		}
		if _, err := applyVersion(ctx, db, fsys, s); err != nil {
			return err
		}
	}
	return recordCompatibility(ctx, db, srcs, compat)
}

// CompatTable records, for each applied migration that declares it, the
// oldest schema version whose code still works once it is applied.
// NewPgManager of older code reads it (see docs/MIGRATIONS.md).
const CompatTable = "rlmm_schema_compat"

// compatRE matches a migration's declaration, a line of its own:
//
//	-- rlmm:compatible-with 2
//
// meaning: code built for schema 2 (or newer) keeps working on the schema
// once this migration is applied.
var compatRE = regexp.MustCompile(`(?m)^--\s*rlmm:compatible-with\s+(\d+)\s*$`)

// Compatibility returns, for each migration of fsys that declares
// "-- rlmm:compatible-with N", its version and N. A migration without the
// line declares nothing: code older than it refuses the schema.
func Compatibility(fsys fs.FS) (map[int64]int64, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	out := map[int64]int64{}
	for _, name := range names {
		var version int64
		if _, err := fmt.Sscanf(name, "%d_", &version); err != nil {
			continue
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		all := compatRE.FindAllSubmatch(b, -1)
		if len(all) == 0 {
			continue
		}
		if len(all) > 1 {
			return nil, fmt.Errorf("migrations: %s declares rlmm:compatible-with %d times; declare it once", name, len(all))
		}
		oldest, err := strconv.ParseInt(string(all[0][1]), 10, 64)
		if err != nil || oldest < 1 || oldest >= version {
			return nil, fmt.Errorf("migrations: %s declares rlmm:compatible-with %s; it must name an older schema version, 1 to %d", name, all[0][1], version-1)
		}
		out[version] = oldest
	}
	return out, nil
}

// ensureCompatTable creates CompatTable (under the migration lock).
func ensureCompatTable(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+CompatTable+` (
    version                bigint PRIMARY KEY,
    oldest_compatible_code bigint NOT NULL,
    CONSTRAINT `+CompatTable+`_check CHECK (0 < oldest_compatible_code AND oldest_compatible_code < version)
);
COMMENT ON TABLE `+CompatTable+` IS 'Written by Migrate from each migration''s "-- rlmm:compatible-with N" line: code built for schema N or newer still works once this version is applied. See docs/MIGRATIONS.md.';
COMMENT ON COLUMN `+CompatTable+`.version IS 'The migration (goose version).';
COMMENT ON COLUMN `+CompatTable+`.oldest_compatible_code IS 'The oldest schema version whose code still works once this migration is applied.';`); err != nil {
		return fmt.Errorf("migrations: create %s: %w", CompatTable, err)
	}
	return nil
}

// recordCompatibility makes CompatTable hold, for each applied migration of
// srcs, exactly what its file declares: the row of a declaration, no row
// without one. A transactional migration recorded its row as it applied;
// this catches up a NO TRANSACTION one, a database migrated before the
// table existed, and a row left by another migration of the same number.
// Under the migration lock.
func recordCompatibility(ctx context.Context, db *sql.DB, srcs []source, compat map[int64]int64) error {
	for _, s := range srcs {
		oldest, declared := compat[s.version]
		var err error
		_, err = db.ExecContext(ctx, `DELETE FROM `+CompatTable+` WHERE version = $1
AND NOT ($2 AND EXISTS (SELECT FROM `+VersionTable+` WHERE version_id = $1 AND is_applied))`, s.version, declared)
		if err == nil && declared {
			_, err = db.ExecContext(ctx, `INSERT INTO `+CompatTable+` (version, oldest_compatible_code)
SELECT $1, $2 WHERE EXISTS (SELECT FROM `+VersionTable+` WHERE version_id = $1 AND is_applied)
ON CONFLICT (version) DO UPDATE SET oldest_compatible_code = excluded.oldest_compatible_code`, s.version, oldest)
		}
		if err != nil {
			return fmt.Errorf("migrations: record the compatibility of version %d: %w", s.version, err)
		}
	}
	return nil
}

// Baseline is the version of release 1's baseline migration, the whole
// schema of release 1 in one migration (joined from release_1/ by make
// generate). The migrations before it (the
// pre-release chain, 1 to 18) are no longer shipped: the baseline moves a
// database at 18 onto itself and refuses an older one. See
// docs/MIGRATIONS.md, "Releases".
const Baseline = 19

// Release is a release of the schema: the newest migration it ships, and
// the SHA-256 of the migrations it ships, which never change once released
// (TestReleasedMigrationsNeverChange): a later change of the schema is a
// migration of its own.
type Release struct {
	Number int
	Schema int64
	Digest string // over the migrations up to Schema, as Hash reads them
}

// Releases are the releases made, oldest first. Code of release N keeps
// working while the database moves from release N to N+1: every migration
// after release N's schema declares "-- rlmm:compatible-with" that schema
// or older (never older than the baseline). Older code must upgrade first:
// NewPgManager refuses a schema that does not declare its code compatible
// and names both versions. See docs/MIGRATIONS.md, "Releases".
var Releases = []Release{{Number: 1, Schema: Baseline, Digest: "d209ddb9b4967b9d6378ee83c6068a8f943ad0eb6af87a9a5ea5f0b26dae1ea4"}}

// ReleaseOf returns the release that ships schema version v: 0 for a
// version after the newest release (not released yet) or before the
// baseline (the pre-release chain).
func ReleaseOf(v int64) int {
	if v < Baseline {
		return 0
	}
	for _, r := range Releases {
		if v <= r.Schema {
			return r.Number
		}
	}
	return 0
}
