package schemadump_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/schemadump"
	"github.com/krabka/remotestorage/migrations"
)

var update = flag.Bool("update", false, "rewrite schema.sql from the migrations")

func TestMain(m *testing.M) { pgtest.Main(m) }

// schemaFile is the checked-in schema, at the root of the module.
var schemaFile = filepath.Join("..", "..", "schema.sql")

// schema.sql is what the migrations build: a database migrated by the
// library's own Migrate, dumped and normalized. With -update (make schema)
// the test rewrites the file instead of failing.
func TestSchemaSQLMatchesMigrations(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pinnedServer(t)
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	defer pool.Close()
	require.NoError(t, rs.Migrate(ctx, pool))

	got, err := schemadump.Dump(ctx, dsn, migrations.VersionTable, migrations.LockTable)
	require.NoError(t, err)
	if *update {
		require.NoError(t, os.WriteFile(schemaFile, got, 0o644))
		return
	}
	want, err := os.ReadFile(schemaFile)
	require.NoError(t, err, "run `make schema` to create schema.sql")
	require.Equal(t, string(want), string(got),
		"schema.sql differs from what the migrations build: run `make schema` (never edit an applied migration to match it)")
}

// pinnedServer starts a server of schemadump.PinnedMajor for the test,
// whichever server the other tests run on, and returns a DSN for an empty
// database of it.
func pinnedServer(t *testing.T) string {
	t.Helper()
	return pgtest.NewServerOf(t, schemadump.PinnedMajor)
}

func TestNormalizeDropsWhatVariesBetweenRuns(t *testing.T) {
	t.Parallel()
	raw := `--
-- PostgreSQL database dump
--

\restrict 3kTq9PpZcV1mR

-- Dumped from database version 15.18 (Debian 15.18-0+deb12u1)
-- Dumped by pg_dump version 15.18 (Debian 15.18-0+deb12u1)

SET statement_timeout = 0;
SELECT pg_catalog.set_config('search_path', '', false);

--
-- Name: rlmm_t; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.rlmm_t (
    id bigint NOT NULL   
);
ALTER TABLE ONLY public.rlmm_t ALTER COLUMN id SET (pg_attver=22110744);



--
-- PostgreSQL database dump complete
--

\unrestrict 3kTq9PpZcV1mR
`
	got := string(schemadump.Normalize([]byte(raw)))
	require.Equal(t, schemadump.Header+`
CREATE TABLE rlmm_t (
    id bigint NOT NULL
);
`, got)
	for _, gone := range []string{"restrict", "Dumped", "SET ", "set_config", "-- Name:", "public.", "pg_attver"} {
		require.False(t, strings.Contains(got, gone), "normalized text keeps %q", gone)
	}
}
