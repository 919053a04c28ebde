package pgcluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// StartStandby starts a hot standby of primary, streaming from it, in a new
// temporary directory, on its own socket (and TCP port with Options.TCP).
// Call [Cluster.Stop] when done; stop the standby before the primary.
//
// The base backup is taken with the server's low-level backup functions
// (pg_backup_start, a copy of the data directory, pg_backup_stop; see
// "Making a Base Backup Using the Low Level API" in PostgreSQL's manual),
// not pg_basebackup, which must match the server's major version and is not
// among the embedded binaries. A physical replication slot on the primary,
// created first, keeps the WAL the standby needs.
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
	if err := c.baseBackup(ctx, primary); err != nil {
		return nil, err
	}
	if opts.TCP {
		if c.port, err = freePort(); err != nil {
			return nil, err
		}
	}
	// The backup carries the primary's pgcluster.conf: this one's listen
	// settings replace it.
	c.extraConf = opts.ExtraConf
	if err := c.writeFile(filepath.Join(c.dataDir, "pgcluster.conf"), c.conf(opts.ExtraConf)); err != nil {
		return nil, err
	}
	if err := c.Startup(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// baseBackup fills c's (absent or empty) data directory with a base backup
// of source and makes it a standby of source: standby.signal, and
// primary_conninfo and primary_slot_name in postgresql.auto.conf.
func (c *Cluster) baseBackup(ctx context.Context, source *Cluster) error {
	conn, err := pgx.Connect(ctx, source.URL("postgres"))
	if err != nil {
		return fmt.Errorf("pgcluster: base backup: %w", err)
	}
	defer conn.Close(context.Background())
	var version int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		return fmt.Errorf("pgcluster: base backup: %w", err)
	}
	var random [6]byte
	_, _ = rand.Read(random[:])
	slot := "pgcluster_" + hex.EncodeToString(random[:])
	if _, err := conn.Exec(ctx, "SELECT pg_create_physical_replication_slot($1, true)", slot); err != nil {
		return fmt.Errorf("pgcluster: base backup: replication slot: %w", err)
	}
	start, stop := "SELECT pg_backup_start('pgcluster', true)", "SELECT labelfile, spcmapfile FROM pg_backup_stop(false)"
	if version < 150000 {
		start, stop = "SELECT pg_start_backup('pgcluster', true, false)", "SELECT labelfile, spcmapfile FROM pg_stop_backup(false, false)"
	}
	if _, err := conn.Exec(ctx, start); err != nil {
		return fmt.Errorf("pgcluster: base backup: %w", err)
	}
	copyErr := c.copyDataDir(source.dataDir)
	var label, spcmap string
	if err := conn.QueryRow(ctx, stop).Scan(&label, &spcmap); err != nil {
		return fmt.Errorf("pgcluster: base backup: %w", errors.Join(err, copyErr))
	}
	if copyErr != nil {
		return copyErr
	}
	if err := c.writeFile(filepath.Join(c.dataDir, "backup_label"), label); err != nil {
		return err
	}
	if spcmap != "" {
		if err := c.writeFile(filepath.Join(c.dataDir, "tablespace_map"), spcmap); err != nil {
			return err
		}
	}
	if err := c.writeFile(filepath.Join(c.dataDir, "standby.signal"), ""); err != nil {
		return err
	}
	auto := filepath.Join(c.dataDir, "postgresql.auto.conf")
	old, err := os.ReadFile(auto)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("pgcluster: %w", err)
	}
	conninfo := fmt.Sprintf("host=%s port=%d user=postgres", source.socketDir, source.port)
	return c.writeFile(auto, string(old)+fmt.Sprintf("primary_conninfo = '%s'\nprimary_slot_name = '%s'\n", conninfo, slot))
}

// skipContents are the directories whose contents a base backup leaves
// out (the manual's list): the standby fills them itself.
var skipContents = map[string]bool{
	"pg_wal": true, "pg_replslot": true, "pg_dynshmem": true, "pg_notify": true,
	"pg_serial": true, "pg_snapshots": true, "pg_stat_tmp": true, "pg_subtrans": true,
}

// skipFiles are the files of a running server a base backup leaves out.
var skipFiles = map[string]bool{
	"postmaster.pid": true, "postmaster.opts": true, "backup_label": true, "tablespace_map": true,
	"standby.signal": true, "recovery.signal": true,
}

// copyDataDir copies a running server's data directory into c's, owned by
// the server user. Files that vanish meanwhile (temporary files, dropped
// relations) are skipped, as pg_basebackup skips them; WAL replay from the
// backup's start makes the copy consistent.
func (c *Cluster) copyDataDir(src string) error {
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		dst := filepath.Join(c.dataDir, rel)
		parent := filepath.Base(filepath.Dir(rel))
		if filepath.Dir(rel) == "pg_wal" && d.IsDir() && d.Name() == "archive_status" {
			if err := c.mkdir(dst); err != nil {
				return err
			}
			return fs.SkipDir
		}
		if rel != "." && skipContents[parent] && filepath.Dir(filepath.Dir(rel)) == "." {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if filepath.Dir(rel) == "." && skipFiles[d.Name()] {
			return nil
		}
		if strings.HasPrefix(d.Name(), "pgsql_tmp") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		switch {
		case d.IsDir():
			return c.mkdir(dst)
		case d.Type().IsRegular():
			return c.copyFile(path, dst)
		default:
			return nil // sockets and links: none in a cluster pgcluster made
		}
	})
	if err != nil {
		return fmt.Errorf("pgcluster: base backup: copy %s: %w", src, err)
	}
	return nil
}

func (c *Cluster) mkdir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return c.chown(dir)
}

func (c *Cluster) chown(path string) error {
	if c.cred == nil {
		return nil
	}
	return os.Chown(path, int(c.cred.Uid), int(c.cred.Gid))
}

func (c *Cluster) copyFile(src, dst string) error {
	in, err := os.Open(src)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }() // read only
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return c.chown(dst)
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
// the new primary. Where the server binaries include pg_rewind (a system
// installation), pg_rewind rewinds its data directory to where the
// timelines forked (running crash recovery first if it was not shut down
// cleanly), then -R writes standby.signal and the connection to source; it
// runs a CHECKPOINT on source first (see below), and the server needs
// wal_log_hints=on (or data checksums) from the start. The embedded
// binaries have no pg_rewind: there the data directory is replaced by a
// fresh base backup of source (as for [StartStandby]), the other way the
// runbook fences an old primary. [Cluster.Startup] then starts it as a
// read-only hot standby of source. The output is pg_rewind's, or one line
// saying a base backup replaced the data directory.
func (c *Cluster) Rewind(ctx context.Context, source *Cluster) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pid() != 0 {
		return "", fmt.Errorf("pgcluster: pg_rewind needs the target server stopped")
	}
	if _, err := os.Stat(filepath.Join(c.binDir, "pg_rewind")); err != nil {
		if err := os.RemoveAll(c.dataDir); err != nil {
			return "", fmt.Errorf("pgcluster: %w", err)
		}
		if err := c.mkdir(c.dataDir); err != nil {
			return "", fmt.Errorf("pgcluster: %w", err)
		}
		if err := c.baseBackup(ctx, source); err != nil {
			return "", err
		}
		out := "pgcluster: no pg_rewind among the server binaries in " + c.binDir +
			": the data directory was replaced by a base backup of the new primary\n"
		return out, c.writeFile(filepath.Join(c.dataDir, "pgcluster.conf"), c.conf(c.extraConf))
	}
	conninfo := fmt.Sprintf("host=%s port=%s user=postgres dbname=postgres", source.socketDir, strconv.Itoa(source.port))
	// pg_rewind reads the source's timeline from its control file, which a
	// promotion updates only at the next checkpoint: without one it says
	// "no rewind required" and the old primary cannot follow.
	conn, err := pgx.Connect(ctx, source.URL("postgres"))
	if err != nil {
		return "", fmt.Errorf("pgcluster: %w", err)
	}
	_, err = conn.Exec(ctx, "CHECKPOINT")
	_ = conn.Close(context.Background())
	if err != nil {
		return "", fmt.Errorf("pgcluster: CHECKPOINT on the new primary: %w", err)
	}
	out, err := c.run(ctx, "pg_rewind", "-D", c.dataDir, "--source-server="+conninfo, "-R", "--progress")
	if err != nil {
		return out, err
	}
	// pg_rewind copied the source's configuration files, its
	// pgcluster.conf (port, socket) among them: put this one's back.
	return out, c.writeFile(filepath.Join(c.dataDir, "pgcluster.conf"), c.conf(c.extraConf))
}
