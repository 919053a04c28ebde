package main

// demo_cluster.go: the demo's throwaway PostgreSQL cluster, created when no
// database is configured and deleted at the end unless --keep.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/krabka/remotestorage/internal/pgcluster"
)

// startThrowaway starts a throwaway cluster and creates demoDatabase in it:
// PostgreSQL of RLMM_PG_VERSION from the embedded binaries, fetched on first
// use, or the installed ones with RLMM_PG_SERVER=system (package
// pgcluster). On error nothing is left running.
func (a *app) startThrowaway(ctx context.Context) (*pgcluster.Cluster, error) {
	out := a.stdout
	fmt.Fprintf(out, "  no database configured (--database-url, DATABASE_URL, PGHOST): starting a throwaway PostgreSQL cluster\n")
	start := time.Now()
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{})
	if err != nil {
		return nil, fmt.Errorf("start a throwaway cluster: %w\n(or point the demo at a database with --database-url or DATABASE_URL)", err)
	}
	if err := createDatabase(ctx, cluster.URL("postgres"), demoDatabase); err != nil {
		_ = cluster.Stop()
		return nil, err
	}
	fmt.Fprintf(out, "  throwaway cluster in %s, started in %s, from the server binaries in %s\n",
		filepath.Dir(cluster.DataDir()), time.Since(start).Round(time.Millisecond), cluster.BinDir())
	return cluster, nil
}

// createDatabase creates dbname through the maintenance database.
func createDatabase(ctx context.Context, adminURL, dbname string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect to the throwaway cluster: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{dbname}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", dbname, err)
	}
	return nil
}

// finishThrowaway stops and deletes the throwaway cluster or, with keep,
// leaves it running and prints how to stop and delete it.
func (a *app) finishThrowaway(cluster *pgcluster.Cluster, keep bool) error {
	if !keep {
		if err := cluster.Stop(); err != nil {
			return fmt.Errorf("stop the throwaway cluster: %w", err)
		}
		return nil
	}
	base := filepath.Dir(cluster.DataDir())
	stop := fmt.Sprintf("%s -D %s stop", filepath.Join(cluster.BinDir(), "pg_ctl"), cluster.DataDir())
	if os.Geteuid() == 0 {
		// PostgreSQL runs as the postgres user when we are root.
		stop = "su postgres -c " + shellQuote(stop)
	}
	remove := "rm -rf " + base
	if !strings.HasPrefix(cluster.SocketDir(), base+string(filepath.Separator)) {
		remove += " " + cluster.SocketDir()
	}
	// pgcluster stops a cluster whose owner exits (its watchdog sees our
	// end of a pipe close); detaching tells it this one is meant to live on.
	if err := cluster.Detach(); err != nil {
		return fmt.Errorf("keep the throwaway cluster: %w", err)
	}
	fmt.Fprintf(a.stdout, "\nThe throwaway cluster keeps running (--keep). Stop and delete it with:\n  %s && %s\n", stop, remove)
	return nil
}
