package main

// The tests run the real rlmmctl binary, built once per test run, against
// databases from pgtest (one server per test binary, a fresh database per
// test). Help and usage checks, which need no database, call run directly.

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage/internal/pgtest"
)

// buildDir holds the binary; TestMain removes it.
var buildDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rlmmctl-test-")
	if err != nil {
		panic(err)
	}
	buildDir = dir
	code := pgtest.Run(m)
	_ = os.RemoveAll(dir) // a temporary directory: nothing to do if it stays
	os.Exit(code)
}

var build struct {
	once sync.Once
	path string
	out  []byte
	err  error
}

// binary builds rlmmctl once (with -race when the tests have it).
func binary(t *testing.T) string {
	t.Helper()
	build.once.Do(func() {
		build.path = filepath.Join(buildDir, "rlmmctl")
		args := []string{"build", "-o", build.path}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, ".")...)
		build.out, build.err = cmd.CombinedOutput()
	})
	require.NoError(t, build.err, "go build: %s", build.out)
	return build.path
}

// result is what one rlmmctl run printed and returned.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) output() string { return r.stdout + r.stderr }

// cleanEnv is the environment without anything that names a database, so
// that a developer's DATABASE_URL or PGHOST never leaks into a test.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name == "DATABASE_URL" || strings.HasPrefix(name, "PG") {
			continue
		}
		env = append(env, kv)
	}
	// A race-enabled binary sleeps a second at exit by default; a race it
	// finds still fails the run (exit status 66).
	env = append(env, "GORACE=atexit_sleep_ms=0 "+os.Getenv("GORACE"))
	return append(env, extra...)
}

// rlmmctl runs the binary with env added to a clean environment.
func rlmmctl(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), args...)
	cmd.Env = cleanEnv(env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	if err != nil {
		var exitErr *exec.ExitError
		require.ErrorAs(t, err, &exitErr, "rlmmctl %v: %s", args, r.output())
		r.code = exitErr.ExitCode()
	}
	return r
}

// ok runs rlmmctl with --database-url dsn and requires exit status 0.
func ok(t *testing.T, dsn string, args ...string) string {
	t.Helper()
	r := rlmmctl(t, nil, append([]string{"--database-url", dsn}, args...)...)
	require.Equal(t, 0, r.code, "rlmmctl %v:\n%s", args, r.output())
	return r.stdout
}

// runInProcess calls run, for checks that need no database.
func runInProcess(args ...string) result {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// pgEnv spells dsn as libpq's PG* variables.
func pgEnv(t *testing.T, dsn string) []string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	require.NoError(t, err)
	env := []string{
		"PGHOST=" + cfg.Host,
		"PGPORT=" + strconv.Itoa(int(cfg.Port)),
		"PGUSER=" + cfg.User,
		"PGDATABASE=" + cfg.Database,
	}
	if cfg.Password != "" {
		env = append(env, "PGPASSWORD="+cfg.Password)
	}
	if cfg.TLSConfig == nil {
		env = append(env, "PGSSLMODE=disable")
	}
	return env
}
