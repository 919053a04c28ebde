// Package pgtest gives each test its own freshly migrated PostgreSQL database.
//
// Use it from a package's tests:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		t.Parallel()
//		pool := pgtest.NewPool(t) // a new database, migrated, dropped at cleanup
//		...
//	}
//
// One server serves a whole test binary. It comes by one of three routes,
// chosen the first time a test asks:
//
//  1. DATABASE_URL: an existing server; its user must be allowed to CREATE
//     DATABASE. If it does not answer, tests fail: there is no fallback.
//  2. container: testcontainers-go's postgres module starts [Image] through
//     a Docker-compatible API (a Docker daemon, or podman's API service
//     named by DOCKER_HOST); the container is removed by [Main].
//  3. local: a throwaway cluster (package pgcluster), stopped and deleted by
//     [Main], from the embedded PostgreSQL binaries of the version
//     RLMM_PG_VERSION names (default [pgcluster.DefaultMajor]), or from the
//     machine's own server binaries with RLMM_PG_SERVER=system.
//
// PGTEST_ROUTE names the route (DATABASE_URL, container or local); then only
// that route is tried, and the tests fail, saying why, when it cannot run.
// Unset, the route is DATABASE_URL when that is set, else local: a
// container is started only when PGTEST_ROUTE=container asks for one. The
// route taken is named once on standard error (visible with go test -v, or
// when a test fails). When it cannot run the test fails, saying how to
// provide a database; it is never skipped.
//
// The migrations of package migrations are applied once per server into a
// template database named by a hash of the migration files, under an advisory
// lock so test binaries sharing a DATABASE_URL server build it once. Each
// test then gets CREATE DATABASE … TEMPLATE … STRATEGY FILE_COPY, dropped
// WITH (FORCE) at cleanup. See [NewDatabase] for what a clone costs.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/krabka/remotestorage/internal/pgcluster"
	"github.com/krabka/remotestorage/migrations"
)

// DefaultImage is the container route's image when PGTEST_IMAGE is unset:
// the official image, pinned to the major version production runs. Where no
// registry is reachable, build one with `make image`, which sets PGTEST_IMAGE.
const DefaultImage = "postgres:15"

// Image returns the container route's image: PGTEST_IMAGE, else DefaultImage.
func Image() string {
	if img := os.Getenv("PGTEST_IMAGE"); img != "" {
		return img
	}
	return DefaultImage
}

// templateLockKey is the pg_advisory_lock key under which templates are built.
const templateLockKey int64 = 0x7067746573745f74 // "pgtest_t"

// ServerKind says where the server of a test binary came from.
type ServerKind string

// The routes to a server, in the order they are tried. PGTEST_ROUTE takes
// these names.
const (
	FromDatabaseURL ServerKind = "DATABASE_URL"
	FromContainer   ServerKind = "container"
	FromLocal       ServerKind = "local"
)

// routes lists the routes in the order they are tried.
var routes = []ServerKind{FromDatabaseURL, FromContainer, FromLocal}

// ServerInfo describes the server of this test binary.
type ServerInfo struct {
	Kind ServerKind
	// Detail says what the route found: the image and engine of a
	// container, the binaries of a local cluster.
	Detail string
	// AdminURL is a DSN for a maintenance database of the server, with the
	// right to create databases. Do not change the server's shared state
	// from parallel tests.
	AdminURL string
	// Cluster is the local cluster when Kind is FromLocal, else nil. Fault
	// tests use it to stop and restart the server; they must not run in
	// parallel with tests that need the server up.
	Cluster *pgcluster.Cluster
}

// server is the one server of this test binary.
var server struct {
	once     sync.Once
	info     ServerInfo
	template string
	pg15     bool // the server supports CREATE DATABASE … STRATEGY
	err      error

	mu   sync.Mutex
	stop func() error // nil once stopped, or when not ours to stop
}

// Main runs the tests, stops the server that pgtest started (if any), and
// exits with the tests' code. Call it from TestMain.
func Main(m *testing.M) {
	os.Exit(Run(m))
}

// Run is [Main] without the exit, for a TestMain that does more (goleak):
// it runs the tests, stops the server pgtest started and returns the code.
// On SIGINT or SIGTERM it stops the server, then dies of the signal.
func Run(m *testing.M) int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case sig := <-sigs:
			_ = stopBouncer()
			_ = stopServer() // the process dies of the signal next
			signal.Reset(sig)
			_ = syscall.Kill(os.Getpid(), sig.(syscall.Signal))
			time.Sleep(time.Second) // let the signal land
			os.Exit(1)
		case <-done:
		}
	}()

	code := m.Run()
	signal.Stop(sigs)
	close(done)
	<-exited
	if err := stopBouncer(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: stopping the test PgBouncer: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	if err := stopServer(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: stopping the test server: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

func stopServer() error {
	server.mu.Lock()
	defer server.mu.Unlock()
	if server.stop == nil {
		return nil
	}
	err := server.stop()
	server.stop = nil
	return err
}

// Server returns this test binary's server, starting it on first use.
func Server(t testing.TB) ServerInfo {
	t.Helper()
	ensureServer(t)
	return server.info
}

// NewDatabase creates a database migrated to the latest version, cloned from
// the template, and returns a DSN for it. The database is dropped at cleanup.
//
// Cost, measured with the local cluster on this project's machine (2 cores,
// ext4, PostgreSQL 15.18, an 8 MB template): CREATE DATABASE … STRATEGY
// FILE_COPY took 170–350 ms while the machine was otherwise nearly idle, and
// 0.5–1 s while other test suites kept both cores busy; the DROP at cleanup
// adds about 90 ms. FILE_COPY runs two checkpoints and fsyncs every copied
// file (fsync stays on), so clones serialise on the checkpointer: parallel
// tests do not make them cheaper. TestCloneTiming and BenchmarkNewDatabase
// measure it.
func NewDatabase(t testing.TB) string {
	t.Helper()
	ensureServer(t)
	return createDatabase(t, server.template)
}

// NewEmptyDatabase creates a database with no migrations applied (a copy of
// template0) and returns a DSN for it. The database is dropped at cleanup.
func NewEmptyDatabase(t testing.TB) string {
	t.Helper()
	ensureServer(t)
	return createDatabase(t, "template0")
}

// NewPool returns a pool on a new migrated database ([NewDatabase]); the pool
// is closed, then the database dropped, at cleanup.
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	dsn := NewDatabase(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// NewServerOf starts a throwaway server of PostgreSQL major, apart from the
// shared one (the embedded binaries of that major, or the system's with
// RLMM_PG_SERVER=system), and returns a DSN for its maintenance database.
// The server is stopped at cleanup.
func NewServerOf(t testing.TB, major int) string {
	t.Helper()
	bin, err := pgcluster.FindBinDirVersion(major)
	if err != nil {
		t.Fatalf("pgtest: PostgreSQL %d: %v", major, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := pgcluster.Start(ctx, pgcluster.Options{BinDir: bin})
	if err != nil {
		t.Fatalf("pgtest: start PostgreSQL %d: %v", major, err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("pgtest: stop PostgreSQL %d: %v", major, err)
		}
	})
	return c.URL("postgres")
}

func ensureServer(t testing.TB) {
	t.Helper()
	server.once.Do(func() {
		server.err = startServer()
	})
	if server.err != nil {
		t.Fatal(server.err)
	}
}

func startServer() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	info, stop, err := findServer(ctx)
	if err != nil {
		return err
	}
	server.mu.Lock()
	server.info, server.stop = info, stop
	server.mu.Unlock()

	conn, err := connect(ctx, info.AdminURL)
	if err != nil {
		return fmt.Errorf("pgtest: %s server: %w", info.Kind, err)
	}
	defer conn.Close(context.Background())
	var version int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	server.pg15 = version >= 150000
	var versionText string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&versionText); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	say("pgtest: route %s: PostgreSQL %s, %s", info.Kind, versionText, info.Detail)
	server.template, err = ensureTemplate(ctx, conn, info.AdminURL)
	return err
}

// say writes one line to standard error: go test shows it with -v, or when
// the package fails.
func say(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

// findServer takes the route PGTEST_ROUTE names, or else the first that
// works. stop is nil for DATABASE_URL.
func findServer(ctx context.Context) (ServerInfo, func() error, error) {
	want, err := routeFromEnv()
	if err != nil {
		return ServerInfo{}, nil, err
	}
	if want != "" {
		info, stop, err := tryRoute(ctx, want, true)
		if err != nil {
			return ServerInfo{}, nil, fmt.Errorf("pgtest: PGTEST_ROUTE=%s: %w", want, err)
		}
		return info, stop, nil
	}

	route := FromLocal
	if os.Getenv("DATABASE_URL") != "" {
		route = FromDatabaseURL
	}
	info, stop, err := tryRoute(ctx, route, false)
	if err != nil {
		return ServerInfo{}, nil, fmt.Errorf(`pgtest: route %s: %w
Without PGTEST_ROUTE the tests run on DATABASE_URL when it is set, else on a throwaway cluster from the
embedded PostgreSQL binaries (RLMM_PG_VERSION, RLMM_PG_SERVER: docs/TESTING.md). Other ways to a server:
  - DATABASE_URL=postgres://user:password@host:5432/dbname?sslmode=disable, a server where that user may CREATE DATABASE;
  - PGTEST_ROUTE=container and a Docker-compatible engine (a Docker daemon, or podman's API service with DOCKER_HOST)
    that has or can pull %s (PGTEST_IMAGE; make image builds one locally);
  - RLMM_PG_SERVER=system and the server binaries installed (apt-get install postgresql); as root, also an OS user
    named postgres (useradd postgres)`, route, err, Image())
	}
	return info, stop, nil
}

// routeFromEnv returns the route PGTEST_ROUTE names, or "" when it is unset.
func routeFromEnv() (ServerKind, error) {
	v := os.Getenv("PGTEST_ROUTE")
	if v == "" {
		return "", nil
	}
	for _, r := range routes {
		if strings.EqualFold(v, string(r)) {
			return r, nil
		}
	}
	return "", fmt.Errorf("pgtest: PGTEST_ROUTE=%q is not a route; use %s, %s or %s, or unset it to take the first that works",
		v, FromDatabaseURL, FromContainer, FromLocal)
}

// tryRoute starts (or reaches) the server of one route; named says
// PGTEST_ROUTE named it.
func tryRoute(ctx context.Context, route ServerKind, named bool) (ServerInfo, func() error, error) {
	switch route {
	case FromDatabaseURL:
		dsn := os.Getenv("DATABASE_URL")
		if dsn == "" {
			return ServerInfo{}, nil, errors.New("DATABASE_URL is not set")
		}
		conn, err := connect(ctx, dsn)
		if err != nil {
			return ServerInfo{}, nil, fmt.Errorf("DATABASE_URL is set but the server does not answer: %w", err)
		}
		_ = conn.Close(ctx)
		return ServerInfo{Kind: FromDatabaseURL, AdminURL: dsn, Detail: "at " + redact(dsn)}, nil, nil
	case FromContainer:
		if err := engineHealthy(ctx, named); err != nil {
			return ServerInfo{}, nil, err
		}
		return startContainer(ctx)
	default:
		c, err := pgcluster.Start(ctx, pgcluster.Options{})
		if err != nil {
			return ServerInfo{}, nil, err
		}
		source, _ := pgcluster.Source() // Start checked it
		return ServerInfo{
			Kind: FromLocal, AdminURL: c.URL("postgres"), Cluster: c,
			Detail: "a throwaway cluster from the " + source + " server binaries in " + c.BinDir(),
		}, c.Stop, nil
	}
}

// redact returns dsn without its password, for messages.
func redact(dsn string) string {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return "(an unparsable DSN)"
	}
	return fmt.Sprintf("%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
}

func connect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return pgx.Connect(ctx, dsn)
}

// ensureTemplate returns the name of the template database for the current
// migrations, building it if no finished one exists. A template is finished
// when it is marked IS_TEMPLATE, which happens last, so one left half-built by
// a killed test binary is dropped and rebuilt.
func ensureTemplate(ctx context.Context, conn *pgx.Conn, adminURL string) (string, error) {
	hash, err := migrations.Hash()
	if err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	name := "pgtest_tmpl_" + hash // a valid identifier: Hash is hex digits
	ident := pgx.Identifier{name}.Sanitize()

	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", templateLockKey); err != nil {
		return "", fmt.Errorf("pgtest: template lock: %w", err)
	}
	defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", templateLockKey) //nolint:errcheck // the session ends soon anyway

	var exists, done bool
	err = conn.QueryRow(ctx,
		"SELECT count(*) > 0, coalesce(bool_or(datistemplate), false) FROM pg_database WHERE datname = $1",
		name).Scan(&exists, &done)
	if err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	if done {
		return name, nil
	}
	if exists {
		if _, err := conn.Exec(ctx, "DROP DATABASE "+ident+" WITH (FORCE)"); err != nil {
			return "", fmt.Errorf("pgtest: drop half-built template: %w", err)
		}
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident+" TEMPLATE template0"); err != nil {
		return "", fmt.Errorf("pgtest: create template: %w", err)
	}
	dsn, err := withDatabase(adminURL, name)
	if err != nil {
		return "", err
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	err = migrations.Up(ctx, db)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("pgtest: migrate template %s: %w", name, err)
	}
	// No connections to the template from now on: CREATE DATABASE fails
	// while anyone is connected to its template.
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident+" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"); err != nil {
		return "", fmt.Errorf("pgtest: mark template: %w", err)
	}
	return name, nil
}

// createDatabase clones template into a new database named after the test
// and schedules its drop.
func createDatabase(t testing.TB, template string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	name := databaseName(t.Name())
	ident := pgx.Identifier{name}.Sanitize()
	stmt := "CREATE DATABASE " + ident + " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	if server.pg15 {
		stmt += " STRATEGY FILE_COPY"
	}
	if err := adminExec(ctx, stmt); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := adminExec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	dsn, err := withDatabase(server.info.AdminURL, name)
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}

// adminExec runs one statement on a fresh admin connection, which survives
// fault tests restarting the server better than a pool would.
func adminExec(ctx context.Context, sql string) error {
	conn, err := connect(ctx, server.info.AdminURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// databaseName returns a unique, recognisable database name for a test:
// t_<test name, sanitised and shortened>_<random>, at most 63 bytes.
func databaseName(testName string) string {
	var b strings.Builder
	b.WriteString("t_")
	for _, r := range strings.ToLower(testName) {
		if b.Len() >= 40 {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	var random [6]byte
	_, _ = rand.Read(random[:])
	b.WriteByte('_')
	b.WriteString(hex.EncodeToString(random[:]))
	return b.String()
}

// withDatabase returns dsn with its database replaced by dbname. It handles
// URLs and keyword/value strings.
func withDatabase(dsn, dbname string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("pgtest: parse DSN: %w", err)
		}
		u.Path, u.RawPath = "/"+dbname, ""
		q := u.Query()
		if q.Has("dbname") {
			q.Del("dbname")
			u.RawQuery = q.Encode()
		}
		return u.String(), nil
	}
	if _, err := pgx.ParseConfig(dsn); err != nil {
		return "", fmt.Errorf("pgtest: parse DSN: %w", err)
	}
	// In keyword/value form the last occurrence of a keyword wins.
	return dsn + " dbname='" + dbname + "'", nil
}
