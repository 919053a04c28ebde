package main

import (
	"context"
	"fmt"
	"testing"

	"os/exec"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgcluster"
	"github.com/krabka/remotestorage/internal/pgtest"
)

func TestMigrateUpThenStatusOnEmptyDatabase(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewEmptyDatabase(t)

	before := ok(t, dsn, "migrate", "status")
	require.Contains(t, before, "pending")
	require.Contains(t, before, "00001_create_rlmm_tables.sql")
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
	require.Contains(t, r.stdout, "applied")
	require.NotContains(t, r.stdout, "pending")
	require.Contains(t, r.stdout, fmt.Sprintf("schema version %d: up to date", remotestorage.SchemaVersion))

	require.Contains(t, ok(t, dsn, "migrate", "up"), fmt.Sprintf("already at version %d", remotestorage.SchemaVersion))
}

// Down refuses only a rollback that loses data, and says what it would
// lose: the tables (migration 1), or epoch ends that the epoch rows left
// after a purge cannot rebuild (migration 4). Rolling back the newest
// migration loses nothing.
func TestMigrateDown(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	d := seedInspectData(t, dsn)

	require.Contains(t, ok(t, dsn, "migrate", "down"), "rolled back")
	require.Contains(t, ok(t, dsn, "migrate", "up"), fmt.Sprintf("to %d", remotestorage.SchemaVersion))

	r := rlmmctl(t, nil, "--database-url", dsn, "migrate", "down", "--to", "0")
	require.Equal(t, exitFailure, r.code, r.output())
	require.Contains(t, r.stderr, "undoes migration 1, which drops the remotestorage tables and their")
	require.Contains(t, r.stderr, "--force")

	// Nothing purged yet: 00004's backfill would rebuild every epoch end.
	// Then segment 3, the only one reaching offset 3999 of epoch 1, purged.
	pool, err := pgxpool.New(t.Context(), dsn)
	require.NoError(t, err)
	defer pool.Close()
	_, err = pool.Exec(t.Context(), "DELETE FROM rlmm_segments WHERE segment_id = $1", d.s[3])
	require.NoError(t, err)
	r = rlmmctl(t, nil, "--database-url", dsn, "migrate", "down", "--to", "3")
	require.Equal(t, exitFailure, r.code, r.output())
	require.Contains(t, r.stderr, "undoes migration 4, which drops rlmm_epoch_ends")
	require.Contains(t, r.stderr, "1 of its rows (in 1 partitions) came from segments purged since")
	require.Contains(t, r.stderr, "--force")
	require.Contains(t, ok(t, dsn, "migrate", "status"), "up to date")

	require.Contains(t, ok(t, dsn, "migrate", "down", "--force", "--to", "0"), "rolled back")
	require.Contains(t, ok(t, dsn, "migrate", "status"), "pending")
	require.Contains(t, ok(t, dsn, "migrate", "down"), "nothing to roll back")
	require.Contains(t, ok(t, dsn, "migrate", "up"), fmt.Sprintf("from version 0 to %d", remotestorage.SchemaVersion))
}

func TestMigrateSQL(t *testing.T) {
	t.Parallel()
	// No database needed.
	r := rlmmctl(t, nil, "migrate", "sql")
	require.Equal(t, 0, r.code, r.output())
	sql := r.stdout
	for _, want := range []string{
		"CREATE TABLE rlmm_partitions", "CREATE TABLE rlmm_segments", "CREATE TABLE rlmm_segment_epochs",
		"BEGIN;", "COMMIT;", "INSERT INTO rlmm_goose_db_version (version_id, is_applied) VALUES (1, true);",
	} {
		require.Contains(t, sql, want)
	}
	require.NotContains(t, sql, "+goose")
	require.NotContains(t, sql, "DROP TABLE", "only the Up sections")

	require.NotContains(t, ok(t, "", "migrate", "sql", "--no-version-table"), "rlmm_goose_db_version")
	require.Contains(t, ok(t, "", "migrate", "sql", "--after", fmt.Sprint(remotestorage.SchemaVersion)), fmt.Sprintf("Nothing newer than version %d", remotestorage.SchemaVersion))

	// What a DBA does with it: apply it with their own tool. Then the
	// library and goose see a migrated schema.
	dsn := pgtest.NewEmptyDatabase(t)
	ctx := context.Background()
	// As the help says, with psql: statement by statement, so that a
	// migration marked NO TRANSACTION (CREATE INDEX CONCURRENTLY) runs
	// outside a transaction block, where one multi-statement query would not.
	bin, err := pgcluster.FindBinDir()
	require.NoError(t, err)
	psql := exec.CommandContext(ctx, filepath.Join(bin, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", "-", dsn)
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
