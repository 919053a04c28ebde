package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// command builds a command that runs as the server user in baseDir, with no
// PG* variables from our environment.
func (c *Cluster) command(ctx context.Context, path string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = c.baseDir
	env := []string{"HOME=" + c.baseDir, "LC_ALL=C", "PGDATA=" + c.dataDir}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") && !strings.HasPrefix(kv, "HOME=") &&
			!strings.HasPrefix(kv, "LC_") && !strings.HasPrefix(kv, "LANG") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	// A server started without -l would keep our output pipes open.
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// run runs one of the cluster's binaries and returns its combined output.
func (c *Cluster) run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := c.command(ctx, filepath.Join(c.binDir, name), args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("pgcluster: %s %s: %w\n%s", name, strings.Join(args, " "), err,
			strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// Kill sends SIGKILL to the postmaster, as the OOM killer would, and waits
// until no server process of the cluster is left (the backends notice the
// postmaster's death and exit). [Cluster.Startup] then runs crash recovery.
func (c *Cluster) Kill(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	pid := c.pid()
	if pid == 0 {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("pgcluster: kill postmaster %d: %w", pid, err)
	}
	// Backends hold the data directory until they exit, and a new postmaster
	// refuses to start while they do, or while the old pid exists at all: it
	// checks with kill(pid, 0), which succeeds on a zombie not yet reaped by
	// init. If the zombie stays (an init that does not reap), remove the
	// stale lock file, which is safe once every process is dead.
	deadSince := time.Time{}
	for {
		if !processAlive(pid) && !c.backendsAlive() {
			if syscall.Kill(pid, 0) != nil {
				return nil
			}
			if deadSince.IsZero() {
				deadSince = time.Now()
			} else if time.Since(deadSince) > 3*time.Second {
				if err := os.Remove(filepath.Join(c.dataDir, "postmaster.pid")); err != nil {
					return fmt.Errorf("pgcluster: %w", err)
				}
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgcluster: waiting for the killed server to exit: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// backendsAlive reports whether a process still works in our data directory
// (every server process chdirs there). It reads /proc; elsewhere it reports
// false.
func (c *Cluster) backendsAlive() bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err == nil && cwd == c.dataDir && processAlive(pid) {
			return true
		}
	}
	return false
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	// A zombie is dead for our purposes.
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}

// pid returns the postmaster's pid from postmaster.pid, or 0 when the server
// is not running.
func (c *Cluster) pid() int {
	b, err := os.ReadFile(filepath.Join(c.dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 || !processAlive(pid) {
		return 0
	}
	return pid
}

// Running reports whether the postmaster is running.
func (c *Cluster) Running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pid() != 0
}

// PgCtl runs pg_ctl as the server user with PGDATA set to the data directory
// and returns its combined output, e.g. PgCtl(ctx, "status"). Give "start"
// a "-l" log file, or the server's output holds pg_ctl's pipe open.
func (c *Cluster) PgCtl(ctx context.Context, args ...string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.run(ctx, "pg_ctl", args...)
}
