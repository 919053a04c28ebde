package main

import (
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgcluster"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/migrations"
)

// embeddedMigrations are the migration files rlmmctl embeds, in version
// order; the first is release 1's baseline.
func embeddedMigrations(t *testing.T) []upSection {
	t.Helper()
	names, err := fs.Glob(migrations.FS(), "*.sql")
	require.NoError(t, err)
	var out []upSection
	for _, name := range names {
		b, err := fs.ReadFile(migrations.FS(), name)
		require.NoError(t, err)
		s, err := parseUpSection(name, string(b))
		require.NoError(t, err)
		out = append(out, s)
	}
	slices.SortFunc(out, func(x, y upSection) int { return cmp.Compare(x.version, y.version) })
	require.NotEmpty(t, out)
	require.EqualValues(t, migrations.Baseline, out[0].version, "the first migration shipped is the baseline")
	return out
}

// schemaObjects lists the tables, views, sequences and functions of the
// database's schema, except goose's bookkeeping (the version table and its
// sequence, the lock table, the compatibility table), which a rollback
// leaves.
func schemaObjects(t *testing.T, dsn string) []string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	rows, err := conn.Query(t.Context(), `
		SELECT c.relname FROM pg_class c
		WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
		  AND c.relname <> ALL ($1) AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_class'::regclass
		      AND d.objid = c.oid AND d.refobjid = ANY (SELECT to_regclass(n) FROM unnest($1::text[]) n) AND d.deptype IN ('a', 'i'))
		UNION ALL
		SELECT p.oid::regprocedure::text FROM pg_proc p WHERE p.pronamespace = current_schema()::regnamespace
		ORDER BY 1`, []string{migrations.VersionTable, migrations.LockTable, migrations.CompatTable})
	require.NoError(t, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return names
}

// TestMigrateUpThenStatusOnEmptyDatabase: on a database never migrated,
// status lists the embedded migrations, the baseline first, as pending;
// a broker's library refuses the database pointing at migrate up; up
// applies them (through any of the three ways of naming the database) and
// status then lists them applied.
func TestMigrateUpThenStatusOnEmptyDatabase(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewEmptyDatabase(t)
	embedded := embeddedMigrations(t)
	row := func(s upSection, state string) string {
		return fmt.Sprintf(`(?m)^%d\s+%s\s+.*\s%s$`, s.version, state, regexp.QuoteMeta(s.file))
	}

	before := ok(t, dsn, "migrate", "status")
	for _, s := range embedded {
		require.Regexp(t, row(s, "pending"), before)
	}
	require.Len(t, regexp.MustCompile(`(?m)^\d+\s+(pending|applied)\s`).FindAllString(before, -1), len(embedded), before)
	require.Contains(t, before, "schema version 0, this rlmmctl expects "+fmt.Sprint(remotestorage.SchemaVersion))
	require.Contains(t, before, "run `rlmmctl migrate up`")

	// A broker's library refuses the unmigrated database, pointing here.
	r := rlmmctl(t, nil, "--database-url", dsn, "segments", "list", "--topic-id", "b9Yw3cT7RIWqrVNH8pz5Ug", "--partition", "0")
	require.Equal(t, exitFailure, r.code, r.output())
	require.Contains(t, r.stderr, "rlmmctl migrate up")

	// Up through DATABASE_URL, status through the PG* variables: all three
	// ways of naming the database reach the same one.
	r = rlmmctl(t, []string{"DATABASE_URL=" + dsn}, "migrate", "up")
	require.Equal(t, 0, r.code, r.output())
	require.Contains(t, r.stdout, fmt.Sprintf("migrated the schema from version 0 to %d", remotestorage.SchemaVersion))
	require.Contains(t, r.stdout, "(from DATABASE_URL)")

	r = rlmmctl(t, pgEnv(t, dsn), "migrate", "status")
	require.Equal(t, 0, r.code, r.output())
	for _, s := range embedded {
		require.Regexp(t, row(s, "applied"), r.stdout)
	}
	require.NotContains(t, r.stdout, "pending")
	require.Contains(t, r.stdout, fmt.Sprintf("schema version %d: up to date", remotestorage.SchemaVersion))

	require.Contains(t, ok(t, dsn, "migrate", "up"), fmt.Sprintf("already at version %d", remotestorage.SchemaVersion))
}

// TestMigrateDown: rolling back release 1's baseline empties the schema:
// every table, view and function of it goes, and only goose's bookkeeping
// stays. Down refuses it, with or without --to, while the tables hold
// metadata, saying how many rows it would drop, and changes nothing; with
// --force, or once the tables are empty, it rolls back. Up then creates the
// same schema again.
func TestMigrateDown(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	baseline := embeddedMigrations(t)[0]
	schema := schemaObjects(t, dsn)
	for _, want := range []string{"rlmm_partitions", "rlmm_segments", "rlmm_segment_epochs", "rlmm_epoch_ends", "rlmm_segments_v", "rlmm_resync()"} {
		require.Contains(t, schema, want)
	}
	seedInspectData(t, dsn) // 2 partitions, 7 segments

	for _, args := range [][]string{nil, {"--to", "0"}} {
		r := rlmmctl(t, nil, append([]string{"--database-url", dsn, "migrate", "down"}, args...)...)
		require.Equal(t, exitFailure, r.code, r.output())
		require.Contains(t, r.stderr, fmt.Sprintf("undoes migration %d, release 1's baseline, which drops the remotestorage tables and their 9 rows", migrations.Baseline))
		require.Contains(t, r.stderr, "--force")
	}
	require.Equal(t, schema, schemaObjects(t, dsn), "a refused rollback changes nothing")
	require.Contains(t, ok(t, dsn, "migrate", "status"), "up to date")
	require.Contains(t, ok(t, dsn, "segments", "list", "--topic", "orders", "--partition", "0"), "COPY_SEGMENT_STARTED")

	out := ok(t, dsn, "migrate", "down", "--force")
	require.Contains(t, out, "rolled back")
	require.Contains(t, out, baseline.file)
	require.Empty(t, schemaObjects(t, dsn), "rolling back the baseline empties the schema")
	status := ok(t, dsn, "migrate", "status")
	require.Contains(t, status, "pending")
	require.Contains(t, status, "schema version 0,")
	require.Contains(t, ok(t, dsn, "migrate", "down"), "nothing to roll back")

	require.Contains(t, ok(t, dsn, "migrate", "up"), fmt.Sprintf("from version 0 to %d", remotestorage.SchemaVersion))
	require.Equal(t, schema, schemaObjects(t, dsn), "up creates the same schema again")
	// No row to lose: no --force needed.
	require.Contains(t, ok(t, dsn, "migrate", "down", "--to", "0"), "rolled back")
	require.Empty(t, schemaObjects(t, dsn))
	require.Contains(t, ok(t, dsn, "migrate", "up"), fmt.Sprintf("from version 0 to %d", remotestorage.SchemaVersion))
}

// TestMigrateSQL: migrate sql prints the Up section of each embedded
// migration, the baseline first, each in its own transaction with the
// version table's bookkeeping, and nothing of the Down sections; a DBA who
// applies it with psql gets a schema that status, up and the library take
// as up to date.
func TestMigrateSQL(t *testing.T) {
	t.Parallel()
	// No database needed.
	r := rlmmctl(t, nil, "migrate", "sql")
	require.Equal(t, 0, r.code, r.output())
	sql := r.stdout
	embedded := embeddedMigrations(t)
	for _, want := range []string{
		"CREATE TABLE rlmm_partitions", "CREATE TABLE rlmm_segments", "CREATE TABLE rlmm_segment_epochs",
		"CREATE FUNCTION rlmm_set_segment_state", "BEGIN;", "COMMIT;",
	} {
		require.Contains(t, sql, want)
	}
	require.Len(t, regexp.MustCompile(`(?m)^-- Version \d+: `).FindAllString(sql, -1), len(embedded))
	for _, s := range embedded {
		require.Contains(t, sql, fmt.Sprintf("\n-- Version %d: %s\nBEGIN;\n", s.version, s.file))
		require.Contains(t, sql, fmt.Sprintf("INSERT INTO rlmm_goose_db_version (version_id, is_applied) VALUES (%d, true);", s.version))
	}
	if len(embedded) == 1 {
		require.Contains(t, sql, fmt.Sprintf("-- version %d, printed by `rlmmctl migrate sql`.", migrations.Baseline))
	}
	require.NotContains(t, sql, "+goose")
	// Only the Up sections: no line that only a Down section has.
	printed := map[string]bool{}
	for _, line := range strings.Split(sql, "\n") {
		printed[strings.TrimSpace(line)] = true
	}
	for _, s := range embedded {
		b, err := fs.ReadFile(migrations.FS(), s.file)
		require.NoError(t, err)
		_, down, found := strings.Cut(string(b), "-- +goose Down")
		require.True(t, found, s.file)
		upLines := map[string]bool{}
		for _, line := range strings.Split(s.sql, "\n") {
			upLines[strings.TrimSpace(line)] = true
		}
		downOnly := 0
		for _, line := range strings.Split(down, "\n") {
			if line = strings.TrimSpace(line); line != "" && !upLines[line] {
				require.False(t, printed[line], "%s's Down section: %s", s.file, line)
				downOnly++
			}
		}
		require.Positive(t, downOnly, "%s: a Down section with lines of its own", s.file)
	}

	// --no-version-table leaves out the bookkeeping (the baseline itself
	// reads the version table: that stays).
	bare := ok(t, "", "migrate", "sql", "--no-version-table")
	require.NotContains(t, bare, "CREATE TABLE IF NOT EXISTS rlmm_goose_db_version")
	require.NotContains(t, bare, "INSERT INTO rlmm_goose_db_version")
	require.Contains(t, bare, "CREATE TABLE rlmm_segments")
	require.Contains(t, ok(t, "", "migrate", "sql", "--after", fmt.Sprint(remotestorage.SchemaVersion)), fmt.Sprintf("Nothing newer than version %d", remotestorage.SchemaVersion))

	// What a DBA does with it: apply it with their own tool. Then the
	// library and goose see a migrated schema.
	dsn := pgtest.NewEmptyDatabase(t)
	ctx := context.Background()
	// As the help says, with psql: statement by statement, so that a
	// migration marked NO TRANSACTION (CREATE INDEX CONCURRENTLY) runs
	// outside a transaction block, where one multi-statement query would not.
	psqlPath, err := pgcluster.ClientTool("psql", 0)
	require.NoError(t, err)
	psql := exec.CommandContext(ctx, psqlPath, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", "-", dsn)
	psql.Stdin = strings.NewReader(sql)
	out, err := psql.CombinedOutput()
	require.NoError(t, err, string(out))

	status := ok(t, dsn, "migrate", "status")
	require.Contains(t, status, fmt.Sprintf("schema version %d: up to date", remotestorage.SchemaVersion))
	require.NotContains(t, status, "pending")
	require.Contains(t, ok(t, dsn, "migrate", "up"), fmt.Sprintf("already at version %d", remotestorage.SchemaVersion))

	_, _, closeManager := testManager(t, dsn) // the library accepts the schema
	closeManager()
}

func TestParseUpSection(t *testing.T) {
	t.Parallel()
	s, err := parseUpSection("00007_x.sql", `-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION f() RETURNS int AS $$ SELECT 1 $$ LANGUAGE sql;
-- +goose StatementEnd
-- +goose Down
DROP FUNCTION f();
`)
	require.NoError(t, err)
	require.EqualValues(t, 7, s.version)
	require.Equal(t, "CREATE FUNCTION f() RETURNS int AS $$ SELECT 1 $$ LANGUAGE sql;", s.sql)
	require.False(t, s.noTransaction)
	for file, version := range map[string]int64{"00008_x.sql": 8, "00011_x.sql": 11, "00100_x.sql": 100} {
		s, err := parseUpSection(file, "-- +goose Up\nSELECT 1;\n")
		require.NoError(t, err)
		require.Equal(t, version, s.version, "%s: the version is decimal, not octal", file)
	}

	s, err = parseUpSection("00008_y.sql", "-- +goose NO TRANSACTION\n-- +goose Up\nCREATE INDEX CONCURRENTLY i ON t (c);\n")
	require.NoError(t, err)
	require.True(t, s.noTransaction)

	_, err = parseUpSection("00009_z.sql", "-- +goose ENVSUB ON\n-- +goose Up\nSELECT '${X}';\n")
	require.ErrorContains(t, err, "not supported")
	_, err = parseUpSection("nover.sql", "-- +goose Up\nSELECT 1;\n")
	require.Error(t, err)

}
