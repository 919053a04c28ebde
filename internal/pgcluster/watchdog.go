package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
)

// startWatchdog starts a shell, as the server user and in its own process
// group (so a terminal's ^C reaches only us), that waits on a pipe from this
// process. "detach" on the pipe makes it exit; EOF (we died) makes it stop the
// server and remove the directories.
func (c *Cluster) startWatchdog() error {
	sh, err := exec.LookPath("sh")
	if err != nil {
		return nil // best effort: Stop still cleans up
	}
	script := `read -r line; [ "$line" = detach ] && exit 0
"$0" stop -D "$1" -m immediate -w -t 30 >/dev/null 2>&1
rm -rf "$2" "$3"`
	cmd := c.command(context.Background(), sh, "-c", script,
		filepath.Join(c.binDir, "pg_ctl"), c.dataDir, c.baseDir, c.socketDir)
	cmd.SysProcAttr.Setpgid = true
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("pgcluster: watchdog: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgcluster: watchdog: %w", err)
	}
	c.watchdog, c.wdStdin = cmd, stdin
	return nil
}

// Detach leaves the server running after this process exits (rlmmctl demo
// --keep): the watchdog is dismissed and Stop becomes a no-op. Stopping and
// removing the cluster is then the caller's business (pg_ctl stop, rm -rf).
func (c *Cluster) Detach() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.removed {
		return errors.New("pgcluster: cluster already stopped and removed")
	}
	c.removed = true
	return c.dismissWatchdog()
}

// dismissWatchdog tells the watchdog to exit without touching the server,
// and waits for it. Call it with c.mu held.
func (c *Cluster) dismissWatchdog() error {
	if c.watchdog == nil {
		return nil
	}
	_, _ = io.WriteString(c.wdStdin, "detach\n")
	_ = c.wdStdin.Close()
	err := c.watchdog.Wait()
	c.watchdog = nil
	if err != nil {
		return fmt.Errorf("pgcluster: watchdog: %w", err)
	}
	return nil
}
