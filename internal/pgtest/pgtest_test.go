package pgtest

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage/migrations"
)

func TestMain(m *testing.M) { Main(m) }

// requireMigrated checks that the pool's database has the schema at the
// latest migration.
func requireMigrated(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	var segments *string
	require.NoError(t, pool.QueryRow(ctx, "SELECT to_regclass('rlmm_segments')::text").Scan(&segments))
	require.NotNil(t, segments, "table rlmm_segments is missing")
	var version int64
	require.NoError(t, pool.QueryRow(ctx,
		"SELECT max(version_id) FROM "+migrations.VersionTable+" WHERE is_applied").Scan(&version))
	require.Equal(t, migrations.Latest(), version)
}

func TestParallelTestsGetDifferentMigratedDatabases(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	names := map[string]bool{}
	t.Run("group", func(t *testing.T) {
		for _, name := range []string{"a", "b"} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				pool := NewPool(t)
				requireMigrated(t, pool)
				var db string
				require.NoError(t, pool.QueryRow(context.Background(), "SELECT current_database()").Scan(&db))
				mu.Lock()
				names[db] = true
				mu.Unlock()
			})
		}
	})
	require.Len(t, names, 2)
}

func TestWritesAreIsolated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := NewPool(t), NewPool(t)
	_, err := a.Exec(ctx, `INSERT INTO rlmm_partitions (topic_id, partition, topic) VALUES (gen_random_uuid(), 0, 'isolated')`)
	require.NoError(t, err)

	count := func(pool *pgxpool.Pool) int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM rlmm_partitions").Scan(&n))
		return n
	}
	require.Equal(t, 1, count(a))
	require.Equal(t, 0, count(b))
}

func TestDatabaseIsDroppedAtCleanup(t *testing.T) {
	t.Parallel()
	var name string
	t.Run("inner", func(t *testing.T) {
		pool := NewPool(t)
		require.NoError(t, pool.QueryRow(context.Background(), "SELECT current_database()").Scan(&name))
	})
	conn, err := pgx.Connect(context.Background(), Server(t).AdminURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var exists bool
	require.NoError(t, conn.QueryRow(context.Background(),
		"SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists))
	require.False(t, exists, "database %s still exists", name)
}

func TestNewEmptyDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, NewEmptyDatabase(t))
	require.NoError(t, err)
	defer conn.Close(ctx)
	var tables int
	require.NoError(t, conn.QueryRow(ctx,
		"SELECT count(*) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')").Scan(&tables))
	require.Zero(t, tables)

	// The migrations apply to it (what migration tests do).
	db := stdlib.OpenDB(*conn.Config())
	defer db.Close()
	require.NoError(t, migrations.Up(ctx, db))
	var version int64
	require.NoError(t, conn.QueryRow(ctx,
		"SELECT max(version_id) FROM "+migrations.VersionTable+" WHERE is_applied").Scan(&version))
	require.Equal(t, migrations.Latest(), version)
}

func TestServer(t *testing.T) {
	t.Parallel()
	info := Server(t)
	require.NotEmpty(t, info.AdminURL)
	switch info.Kind {
	case FromLocal:
		require.NotNil(t, info.Cluster)
		require.True(t, info.Cluster.Running())
	case FromContainer, FromDatabaseURL:
		require.Nil(t, info.Cluster)
	default:
		t.Fatalf("unknown kind %q", info.Kind)
	}
	if want := os.Getenv("PGTEST_ROUTE"); want != "" {
		require.True(t, strings.EqualFold(want, string(info.Kind)), "PGTEST_ROUTE=%s, yet the route taken is %s", want, info.Kind)
	}
	t.Logf("server: %s %s (%s)", info.Kind, redact(info.AdminURL), info.Detail)
}

// A route that cannot run says why; a misspelt one is refused, not ignored.
func TestRouteErrors(t *testing.T) {
	t.Setenv("PGTEST_ROUTE", "docker")
	_, err := routeFromEnv()
	require.ErrorContains(t, err, `PGTEST_ROUTE="docker" is not a route; use DATABASE_URL, container or local`)

	t.Setenv("PGTEST_ROUTE", "Container")
	route, err := routeFromEnv()
	require.NoError(t, err)
	require.Equal(t, FromContainer, route)

	t.Setenv("DATABASE_URL", "")
	_, _, err = tryRoute(t.Context(), FromDatabaseURL, true)
	require.EqualError(t, err, "DATABASE_URL is not set")
}

// TestCloneTiming logs what NewDatabase costs, one at a time and from eight
// parallel subtests (at most -test.parallel run at once). Figures are in the
// doc comment of NewDatabase.
func TestCloneTiming(t *testing.T) {
	t.Parallel()
	Server(t) // start and build the template outside the timings
	NewDatabase(t)

	var sequential []time.Duration
	for range 5 {
		start := time.Now()
		NewDatabase(t)
		sequential = append(sequential, time.Since(start))
	}
	t.Logf("sequential clones: %v", sequential)

	var mu sync.Mutex
	var parallel []time.Duration
	t.Run("parallel", func(t *testing.T) {
		for range 8 {
			t.Run("clone", func(t *testing.T) {
				t.Parallel()
				start := time.Now()
				NewDatabase(t)
				mu.Lock()
				parallel = append(parallel, time.Since(start))
				mu.Unlock()
			})
		}
	})
	t.Logf("8 parallel clones, -test.parallel=%v: %v", flag.Lookup("test.parallel").Value, parallel)
}

func BenchmarkNewDatabase(b *testing.B) {
	Server(b)
	for b.Loop() {
		NewDatabase(b)
	}
}

func TestWithDatabase(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"postgres://u:p@h:5432/app?sslmode=disable", "postgres://u:p@h:5432/other?sslmode=disable"},
		{"postgresql://u@h/app", "postgresql://u@h/other"},
		{"postgres://postgres@/postgres?host=%2Ftmp%2Fs&port=5432", "postgres://postgres@/other?host=%2Ftmp%2Fs&port=5432"},
		{"postgres://u@h/?dbname=app&sslmode=disable", "postgres://u@h/other?sslmode=disable"},
		{"host=/tmp/s user=postgres dbname=app", "host=/tmp/s user=postgres dbname=app dbname='other'"},
	} {
		got, err := withDatabase(tc.in, "other")
		require.NoError(t, err)
		require.Equal(t, tc.want, got)
		cfg, err := pgx.ParseConfig(got)
		require.NoError(t, err)
		require.Equal(t, "other", cfg.Database)
	}
}

func TestDatabaseName(t *testing.T) {
	t.Parallel()
	a := databaseName("TestSomething/with spaces & a very long name that goes on and on and on")
	b := databaseName("TestSomething/with spaces & a very long name that goes on and on and on")
	require.NotEqual(t, a, b)
	require.LessOrEqual(t, len(a), 63)
	require.Regexp(t, `^t_testsomething_with_spaces_[a-z0-9_]+_[0-9a-f]{12}$`, a)
}

// runSelf runs this test binary's TestServer in a child process with env
// added to (and overriding) this process's environment.
func runSelf(t *testing.T, env ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestServer$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// A route named by PGTEST_ROUTE that cannot run fails the tests, saying
// why; it does not fall back to another route.
func TestNamedRouteDoesNotFallBack(t *testing.T) {
	t.Parallel()
	out, err := runSelf(t, "PGTEST_ROUTE=container", "DOCKER_HOST=unix:///nonexistent/docker.sock", "DATABASE_URL=")
	require.Error(t, err, out)
	require.Contains(t, out, "pgtest: PGTEST_ROUTE=container: no container engine at DOCKER_HOST=unix:///nonexistent/docker.sock")
	require.NotContains(t, out, "pgtest: route local")
}

// Unset, PGTEST_ROUTE means the local route when DATABASE_URL is unset,
// even where a container engine answers, and the route taken is named.
func TestDefaultRouteIsLocal(t *testing.T) {
	t.Parallel()
	out, err := runSelf(t, "PGTEST_ROUTE=", "DOCKER_HOST=unix:///nonexistent/docker.sock", "DATABASE_URL=")
	require.NoError(t, err, out)
	require.NotContains(t, out, "route container")
	require.Equal(t, 1, strings.Count(out, "pgtest: route local: PostgreSQL "), out)
}

// An unknown RLMM_PG_VERSION fails the tests before any server starts,
// naming the versions on offer.
func TestUnknownVersionFailsBeforeAnythingStarts(t *testing.T) {
	t.Parallel()
	out, err := runSelf(t, "PGTEST_ROUTE=", "DATABASE_URL=", "RLMM_PG_VERSION=19")
	require.Error(t, err, out)
	require.Contains(t, out, `RLMM_PG_VERSION="19" is not a PostgreSQL major version on offer; use one of 10, 11, 12, 13, 14, 15, 16, 17, 18`)
	require.NotContains(t, out, "pgtest: route local: PostgreSQL")
}
