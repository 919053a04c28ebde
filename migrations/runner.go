package migrations

// runner.go: how Migrate applies a migration while brokers write and read.
//
// Brokers' writes lock the data tables in one order: rlmm_partitions, then
// rlmm_segments, rlmm_segment_epochs and rlmm_epoch_ends (every write
// statement names them in that order). Reads lock them in other orders
// (a lookup reads rlmm_segments before rlmm_partitions). DDL run as the
// migration's file spells it locks the tables in the order its statements
// name them, so it can deadlock with both. Migrate therefore runs every
// migration that runs in a transaction behind a prelude, inside the same
// transaction: it locks each data table that exists, in the writers' order,
// each lock with a lock_timeout well under deadlock_timeout; in ACCESS
// EXCLUSIVE mode when a statement of the migration needs it (ALTER TABLE,
// DROP INDEX, ...), otherwise in EXCLUSIVE mode, which lets reads go on. A broker waits for the prelude at most that long and
// never takes part in a deadlock the server must break: when the prelude
// times out (a read held one table while waiting for another the prelude
// already had), the transaction rolls back and Migrate tries again after a
// pause. Once the prelude holds the locks, the migration's own statements
// wait for nothing a broker holds.
//
// The prelude also records the migration's "-- rlmm:compatible-with"
// declaration in rlmm_schema_compat in the migration's own transaction (and
// a Down removes it), so the table never holds a row for a migration that
// is not applied.
//
// The files themselves are never changed: their hash (Hash) and what the
// goose CLI or `rlmmctl migrate sql` applies stay the same.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing/fstest"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pressly/goose/v3"
)

// WriterLockOrder is the order in which every write of the library locks
// the data tables. A migration that locks more than one of them must lock
// them in this order (Migrate's prelude does).
var WriterLockOrder = []string{"rlmm_partitions", "rlmm_segments", "rlmm_segment_epochs", "rlmm_epoch_ends"}

// RulesFrom is the first migration held to the rules of docs/MIGRATIONS.md
// (writers' lock order, indexes built concurrently, backfills that bump
// versions and can run again): every migration shipped, from the baseline
// on.
const RulesFrom = Baseline

// source is one migration file.
type source struct {
	version int64
	name    string
	text    string
	noTx    bool
}

// sources reads the migration files of fsys, in version order.
func sources(fsys fs.FS) ([]source, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	var out []source
	for _, name := range names {
		var version int64
		if _, err := fmt.Sscanf(name, "%d_", &version); err != nil {
			continue
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		out = append(out, source{version: version, name: name, text: string(b), noTx: noTxRE.Match(b)})
	}
	slices.SortFunc(out, func(a, b source) int { return cmpInt(a.version, b.version) })
	return out, nil
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

var (
	noTxRE = regexp.MustCompile(`(?m)^\s*--\s*\+goose\s+NO\s+TRANSACTION\s*$`)
	upRE   = regexp.MustCompile(`(?m)^\s*--\s*\+goose\s+Up\s*$`)
	downRE = regexp.MustCompile(`(?m)^\s*--\s*\+goose\s+Down\s*$`)
)

// section returns the Up (up) or Down part of a migration's text.
func section(text string, up bool) string {
	u := upRE.FindStringIndex(text)
	d := downRE.FindStringIndex(text)
	switch {
	case up && u == nil:
		return ""
	case up && d != nil && d[0] > u[1]:
		return text[u[1]:d[0]]
	case up:
		return text[u[1]:]
	case d == nil:
		return ""
	case u != nil && u[0] > d[1]:
		return text[d[1]:u[0]]
	}
	return text[d[1]:]
}

// needsAccessExclusiveRE matches a statement that takes ACCESS EXCLUSIVE
// on a table: most ALTER TABLE forms, DROP of a table, an index or a
// trigger, TRUNCATE, and rebuilds.
var needsAccessExclusiveRE = regexp.MustCompile(`(?is)^\s*(ALTER\s+TABLE|ALTER\s+INDEX|DROP\s+(TABLE|INDEX|TRIGGER|RULE|POLICY)|TRUNCATE|REINDEX|CLUSTER|VACUUM\s+FULL|LOCK\b)`)

// lockMode is the mode the prelude takes the data tables in: ACCESS
// EXCLUSIVE when a statement of the section may need it on one of them
// (the prelude must take the strongest lock up front: upgrading a lock
// later, while reads wait behind the request, can deadlock), otherwise
// EXCLUSIVE, which lets reads go on while the migration runs.
func (s source) lockMode(up bool) string {
	for _, stmt := range splitStatements(section(s.text, up)) {
		if needsAccessExclusiveRE.MatchString(stmt) {
			return "ACCESS EXCLUSIVE"
		}
	}
	return "EXCLUSIVE"
}

// splitStatements splits a section as goose does: a statement ends at a
// line that ends with ';', except inside a StatementBegin block, which is
// one statement. Comment lines outside blocks are left out.
func splitStatements(section string) []string {
	var out []string
	var b strings.Builder
	inBlock := false
	for _, line := range strings.Split(section, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case blockBeginRE.MatchString(trimmed):
			inBlock = true
			continue
		case blockEndRE.MatchString(trimmed):
			inBlock = false
			out = append(out, b.String())
			b.Reset()
			continue
		case strings.HasPrefix(trimmed, "--") && !inBlock:
			continue
		}
		b.WriteString(line)
		b.WriteString("\n")
		if !inBlock && strings.HasSuffix(trimmed, ";") {
			out = append(out, b.String())
			b.Reset()
		}
	}
	if strings.TrimSpace(b.String()) != "" {
		out = append(out, b.String())
	}
	return out
}

var (
	blockBeginRE = regexp.MustCompile(`^--\s*\+goose\s+StatementBegin`)
	blockEndRE   = regexp.MustCompile(`^--\s*\+goose\s+StatementEnd`)
)

// preludeSQL is the first statement of a transactional migration as Migrate
// runs it. %[1]d is the version; %[2]s the statements that record its
// compatibility; %[3]s the lock mode.
const preludeSQL = `-- +goose StatementBegin
DO $rlmm_migrate$
DECLARE
    saved_lock_timeout text := current_setting('lock_timeout');
    t text;
BEGIN
    -- Migrate's prelude (migrations/runner.go): the data tables, in the
    -- writers' lock order, each lock waited for at most a quarter of
    -- deadlock_timeout (100 ms at most).
    PERFORM set_config('lock_timeout',
        greatest(1, least(100, extract(epoch FROM current_setting('deadlock_timeout')::interval) * 250))::integer || 'ms', true);
    FOREACH t IN ARRAY ARRAY['rlmm_partitions', 'rlmm_segments', 'rlmm_segment_epochs', 'rlmm_epoch_ends'] LOOP
        IF to_regclass(t) IS NOT NULL THEN
            EXECUTE format('LOCK TABLE %%s IN %[3]s MODE', to_regclass(t));
        END IF;
    END LOOP;
    PERFORM set_config('lock_timeout', saved_lock_timeout, true);
    IF to_regclass('rlmm_schema_compat') IS NOT NULL THEN
        EXECUTE 'DELETE FROM rlmm_schema_compat WHERE version = %[1]d';%[2]s
    END IF;
END
$rlmm_migrate$;
-- +goose StatementEnd
`

// compatSQL is a NO TRANSACTION migration's first statement: it forgets
// what an earlier migration of the same number declared.
const compatSQL = `-- +goose StatementBegin
DO $rlmm_migrate$
BEGIN
    IF to_regclass('rlmm_schema_compat') IS NOT NULL THEN
        EXECUTE 'DELETE FROM rlmm_schema_compat WHERE version = %d';
    END IF;
END
$rlmm_migrate$;
-- +goose StatementEnd
`

// prepared returns the text of s as Migrate runs it: the prelude first in
// each section, and in Up the declaration recorded.
func (s source) prepared(compat map[int64]int64) string {
	record := func(up bool) string {
		oldest, ok := compat[s.version]
		if !up || !ok {
			return ""
		}
		return fmt.Sprintf("\n        EXECUTE 'INSERT INTO rlmm_schema_compat (version, oldest_compatible_code) VALUES (%d, %d)';", s.version, oldest)
	}
	prelude := func(up bool) string {
		if s.noTx {
			return "\n" + fmt.Sprintf(compatSQL, s.version)
		}
		return "\n" + fmt.Sprintf(preludeSQL, s.version, record(up), s.lockMode(up))
	}
	text := s.text
	// Insert after the annotation lines (whose ends the regexps mark).
	if d := downRE.FindStringIndex(text); d != nil {
		text = text[:d[1]] + prelude(false) + text[d[1]:]
	}
	if u := upRE.FindStringIndex(text); u != nil {
		text = text[:u[1]] + prelude(true) + text[u[1]:]
	}
	return text
}

// preparedFS is fsys as Migrate runs it (see prepared).
func preparedFS(fsys fs.FS) (fs.FS, error) {
	compat, err := Compatibility(fsys)
	if err != nil {
		return nil, err
	}
	srcs, err := sources(fsys)
	if err != nil {
		return nil, err
	}
	out := fstest.MapFS{}
	for _, s := range srcs {
		out[s.name] = &fstest.MapFile{Data: []byte(s.prepared(compat))}
	}
	return out, nil
}

// retryable reports whether a migration failed only because it could not
// take its locks in time (the prelude's lock_timeout) or lost a deadlock:
// it rolled back and can run again.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == pgerrcode.LockNotAvailable || pgErr.Code == pgerrcode.DeadlockDetected)
}

// applyVersion applies one migration (Up), retrying while it is refused its
// locks, and returns false when another process applied it meanwhile.
func applyVersion(ctx context.Context, db *sql.DB, fsys fs.FS, s source) (bool, error) {
	pfs, err := preparedFS(fsys)
	if err != nil {
		return false, err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, pfs,
		goose.WithTableName(VersionTable),
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		return false, err
	}
	pause := 10 * time.Millisecond
	for {
		_, err := p.ApplyVersion(ctx, s.version, true)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, goose.ErrAlreadyApplied):
			return false, nil
		case !retryable(err):
			return false, err
		}
		// Half to all of pause, doubling up to a second.
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("migrations: version %d: %w (last attempt: %w)", s.version, ctx.Err(), err)
		case <-time.After(pause/2 + rand.N(pause/2+1)):
		}
		pause = min(2*pause, time.Second)
	}
}

// upToDate reports, reading only, whether every migration of srcs up to
// target is applied and rlmm_schema_compat holds exactly their
// declarations: then Migrate has nothing to write.
func upToDate(ctx context.Context, db *sql.DB, srcs []source, compat map[int64]int64, target int64) (bool, error) {
	var tables struct{ versions, compat bool }
	if err := db.QueryRowContext(ctx, `SELECT to_regclass($1) IS NOT NULL, to_regclass($2) IS NOT NULL`, VersionTable, CompatTable).Scan(&tables.versions, &tables.compat); err != nil {
		return false, err
	}
	if !tables.versions {
		return false, nil
	}
	applied, err := appliedVersions(ctx, db)
	if err != nil {
		return false, err
	}
	recorded := map[int64]int64{}
	if tables.compat {
		rows, err := db.QueryContext(ctx, `SELECT version, oldest_compatible_code FROM `+CompatTable)
		if err != nil {
			return false, err
		}
		for rows.Next() {
			var v, oldest int64
			if err := rows.Scan(&v, &oldest); err != nil {
				rows.Close()
				return false, err
			}
			recorded[v] = oldest
		}
		if err := rows.Close(); err != nil {
			return false, err
		}
		if err := rows.Err(); err != nil {
			return false, err
		}
	}
	for _, s := range srcs {
		if s.version > target {
			continue
		}
		if !applied[s.version] {
			return false, nil
		}
		want, declared := compat[s.version]
		got, has := recorded[s.version]
		if declared != has || want != got {
			return false, nil
		}
	}
	return true, nil
}

// appliedVersions reads the applied versions; none when the version table
// does not exist.
func appliedVersions(ctx context.Context, db *sql.DB) (map[int64]bool, error) {
	applied := map[int64]bool{}
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT to_regclass($1) IS NOT NULL`, VersionTable).Scan(&exists); err != nil || !exists {
		return applied, err
	}
	rows, err := db.QueryContext(ctx, `SELECT DISTINCT version_id FROM `+VersionTable+` WHERE is_applied`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		applied[v] = true
	}
	return applied, rows.Err()
}
