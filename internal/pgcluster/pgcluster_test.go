package pgcluster_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage/internal/pgcluster"
	"github.com/krabka/remotestorage/internal/testwait"
)

// These tests start their own clusters (about 1.5–2 s each here) and do not
// use package pgtest, which is built on this one.

func TestMain(m *testing.M) {
	if os.Getenv("PGCLUSTER_WATCHDOG_HELPER") == "1" {
		watchdogHelper()
	}
	os.Exit(m.Run())
}

func exec1(t *testing.T, dsn, sql string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	require.NoError(t, err)
}

func TestStartSettings(t *testing.T) {
	t.Parallel()
	c := start(t, pgcluster.Options{ExtraConf: map[string]string{"synchronous_commit": "off", "max_connections": "50"}})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	require.NoError(t, err)
	defer conn.Close(ctx)

	settings := map[string]string{}
	rows, err := conn.Query(ctx, `SELECT name, setting FROM pg_settings WHERE name = ANY($1)`,
		[]string{"fsync", "synchronous_commit", "shared_buffers", "max_connections", "listen_addresses", "full_page_writes"})
	require.NoError(t, err)
	for rows.Next() {
		var k, v string
		require.NoError(t, rows.Scan(&k, &v))
		settings[k] = v
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string]string{
		"fsync":              "on", // durability stays on
		"full_page_writes":   "on",
		"synchronous_commit": "off", // ExtraConf
		"max_connections":    "50",  // ExtraConf overrides a default
		"shared_buffers":     "16384",
		"listen_addresses":   "", // unix socket only
	}, settings)

	var user string
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_user").Scan(&user))
	require.Equal(t, "postgres", user)
	require.Contains(t, c.URL("app"), "/app?")
	require.Panics(t, func() { c.TCPURL("app") })
}

// TestImmediateStopAndRestart is what fault tests do: a committed write
// survives "pg_ctl stop -m immediate" (crash recovery on the next start), over
// TCP on the same port as before.
func TestImmediateStopAndRestart(t *testing.T) {
	t.Parallel()
	c := start(t, pgcluster.Options{TCP: true})
	require.True(t, strings.HasPrefix(c.TCPAddr(), "127.0.0.1:"))
	exec1(t, c.TCPURL("postgres"), "CREATE TABLE kv (k int PRIMARY KEY); INSERT INTO kv VALUES (1), (2)")

	ctx := context.Background()
	require.NoError(t, c.Shutdown(ctx, pgcluster.Immediate))
	require.False(t, c.Running())
	_, err := pgx.Connect(ctx, c.URL("postgres"))
	require.Error(t, err)
	require.NoError(t, c.Shutdown(ctx, pgcluster.Immediate), "stopping a stopped server")

	start := time.Now()
	require.NoError(t, c.Startup(ctx))
	t.Logf("restart after an immediate stop (crash recovery): %v", time.Since(start))
	require.True(t, c.Running())
	require.Equal(t, 2, queryInt(t, c.TCPURL("postgres"), "SELECT count(*) FROM kv"))
	require.Equal(t, 2, queryInt(t, c.URL("postgres"), "SELECT count(*) FROM kv"))

	require.NoError(t, c.Restart(ctx, pgcluster.Fast))
	require.Equal(t, 2, queryInt(t, c.URL("postgres"), "SELECT count(*) FROM kv"))

	out, err := c.PgCtl(ctx, "status")
	require.NoError(t, err)
	require.Contains(t, out, "server is running")
}

func TestKillAndRestart(t *testing.T) {
	t.Parallel()
	c := start(t, pgcluster.Options{})
	exec1(t, c.URL("postgres"), "CREATE TABLE kv (k int PRIMARY KEY); INSERT INTO kv VALUES (1)")

	// A connection open during the kill: its backend must be gone before the
	// server can start again.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	require.NoError(t, err)
	defer conn.Close(ctx)

	killCtx, cancel := context.WithTimeout(ctx, testwait.Timeout(t))
	defer cancel()
	killStart := time.Now()
	require.NoError(t, c.Kill(killCtx))
	t.Logf("kill took %v", time.Since(killStart))
	require.False(t, c.Running())
	require.Error(t, conn.Ping(ctx))

	require.NoError(t, c.Startup(ctx))
	require.Equal(t, 1, queryInt(t, c.URL("postgres"), "SELECT count(*) FROM kv"))
}

func TestStopIsIdempotentAndRemovesEverything(t *testing.T) {
	t.Parallel()
	c, err := pgcluster.Start(context.Background(), pgcluster.Options{TCP: true})
	require.NoError(t, err)
	require.DirExists(t, c.DataDir())
	require.DirExists(t, c.SocketDir())
	require.FileExists(t, c.LogFile())
	paths := []string{c.DataDir(), c.SocketDir(), c.LogFile()}

	require.NoError(t, c.Stop())
	require.NoError(t, c.Stop())
	require.False(t, c.Running())
	for _, p := range paths {
		_, err := os.Stat(p)
		require.True(t, os.IsNotExist(err), "%s: %v", p, err)
	}
	require.Error(t, c.Startup(context.Background()))
}

func TestFindBinDir(t *testing.T) {
	t.Parallel()
	dir, err := pgcluster.FindBinDir()
	require.NoError(t, err)
	require.FileExists(t, dir+"/initdb")
	require.FileExists(t, dir+"/pg_ctl")
}

func TestStartFailureShowsLog(t *testing.T) {
	t.Parallel()
	_, err := pgcluster.Start(context.Background(), pgcluster.Options{ExtraConf: map[string]string{"shared_buffers": "nonsense"}})
	require.Error(t, err)
	require.Contains(t, err.Error(), "server log")
	require.Contains(t, err.Error(), `invalid value for parameter "shared_buffers"`)
}

// TestWatchdogCleansUpAfterOwnerDeath starts a cluster in a child process that
// then dies of SIGKILL, and checks that the server stops and its files go.
func TestWatchdogCleansUpAfterOwnerDeath(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "PGCLUSTER_WATCHDOG_HELPER=1")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	var dataDir string
	var pid int
	scanner := bufio.NewScanner(stdout)
	for scanner.Scan() {
		if _, err := fmt.Sscanf(scanner.Text(), "cluster %s %d", &dataDir, &pid); err == nil {
			break
		}
	}
	err = cmd.Wait()
	var exitErr *exec.ExitError
	require.True(t, errors.As(err, &exitErr), "helper: %v", err)
	require.NotEmpty(t, dataDir, "the helper did not report a cluster")

	var dirExists, alive bool
	defer func() {
		if t.Failed() {
			t.Logf("data dir exists: %v, postmaster alive: %v", dirExists, alive)
		}
	}()
	testwait.Until(t, "the watchdog to remove the data dir and stop the postmaster", func() bool {
		_, statErr := os.Stat(dataDir)
		dirExists, alive = !os.IsNotExist(statErr), syscall.Kill(pid, 0) == nil
		return !dirExists && !alive
	})
}

// watchdogHelper is the child process of TestWatchdogCleansUpAfterOwnerDeath:
// it starts a cluster, reports it, and dies without stopping it.
func watchdogHelper() {
	c, err := pgcluster.Start(context.Background(), pgcluster.Options{})
	if err != nil {
		fmt.Println(err)
		os.Exit(3)
	}
	pidFile, err := os.ReadFile(c.DataDir() + "/postmaster.pid")
	if err != nil {
		fmt.Println(err)
		os.Exit(3)
	}
	pid, _, _ := strings.Cut(string(pidFile), "\n")
	fmt.Printf("cluster %s %s\n", c.DataDir(), pid)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}
