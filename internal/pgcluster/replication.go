package pgcluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
)

// StartStandby starts a hot standby of primary: a base backup taken with
// pg_basebackup -R (so it streams from primary), in a new temporary
// directory, on its own socket (and TCP port with Options.TCP). Call
// [Cluster.Stop] when done; stop the standby before the primary.
func StartStandby(ctx context.Context, primary *Cluster, opts Options) (_ *Cluster, err error) {
	if opts.BinDir == "" {
		opts.BinDir = primary.binDir
	}
	c, err := prepare(opts)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()
	if _, err := c.run(ctx, "pg_basebackup", "-D", c.dataDir, "-R", "-X", "stream", "-c", "fast",
		"-h", primary.socketDir, "-p", strconv.Itoa(primary.port), "-U", "postgres"); err != nil {
		return nil, err
	}
	if opts.TCP {
		if c.port, err = freePort(); err != nil {
			return nil, err
		}
	}
	// The backup carries the primary's pgcluster.conf: this one's listen
	// settings replace it.
	if err := c.writeFile(filepath.Join(c.dataDir, "pgcluster.conf"), c.conf(opts.ExtraConf)); err != nil {
		return nil, err
	}
	if err := c.Startup(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Promote turns a hot standby into a primary (pg_ctl promote) and waits
// until it accepts writes.
func (c *Cluster) Promote(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.run(ctx, "pg_ctl", "promote", "-D", c.dataDir, "-w", "-t", "60", "-s")
	return err
}

// Rewind fences a stopped former primary and makes it a standby of source,
// the new primary: pg_rewind rewinds its data directory to where the
// timelines forked (running crash recovery first if it was not shut down
// cleanly), then -R writes standby.signal and the connection to source.
// It runs a CHECKPOINT on source first (see below). The server needs
// wal_log_hints=on (or data checksums) from the start.
// [Cluster.Startup] then starts it as a read-only hot standby of source.
func (c *Cluster) Rewind(ctx context.Context, source *Cluster) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pid() != 0 {
		return "", fmt.Errorf("pgcluster: pg_rewind needs the target server stopped")
	}
	conninfo := fmt.Sprintf("host=%s port=%s user=postgres dbname=postgres", source.socketDir, strconv.Itoa(source.port))
	// pg_rewind reads the source's timeline from its control file, which a
	// promotion updates only at the next checkpoint: without one it says
	// "no rewind required" and the old primary cannot follow.
	if out, err := c.run(ctx, "psql", "-X", "-q", "-d", conninfo, "-c", "CHECKPOINT"); err != nil {
		return out, err
	}
	out, err := c.run(ctx, "pg_rewind", "-D", c.dataDir, "--source-server="+conninfo, "-R", "--progress")
	if err != nil {
		return out, err
	}
	// pg_rewind copied the source's configuration files, its
	// pgcluster.conf (port, socket) among them: put this one's back.
	return out, c.writeFile(filepath.Join(c.dataDir, "pgcluster.conf"), c.conf(c.extraConf))
}
