package main

// demo_cluster.go: the demo's throwaway PostgreSQL cluster, created when no
// database is configured and deleted at the end unless --keep.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/krabka/remotestorage/internal/pgcluster"
)

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

// finishThrowaway keeps the throwaway cluster running (--keep) or leaves it
// to the deferred Stop. kept reports whether the caller must not stop it.
func (a *app) finishThrowaway(ctx context.Context, cluster *pgcluster.Cluster, keep bool) (kept bool, err error) {
	if !keep {
		return false, nil
	}
	out := a.stdout
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
	if detacher, ok := any(cluster).(interface{ Detach() error }); ok {
		if err := detacher.Detach(); err != nil {
			return false, fmt.Errorf("keep the throwaway cluster: %w", err)
		}
		fmt.Fprintf(out, "\nThe throwaway cluster keeps running (--keep). Stop and delete it with:\n  %s && %s\n", stop, remove)
		return true, nil
	}
	// This pgcluster cannot hand its cluster over: keep it alive by staying
	// alive ourselves.
	fmt.Fprintf(out, "\nThe throwaway cluster runs until rlmmctl exits: press Ctrl-C to stop and delete it.\n")
	<-ctx.Done()
	fmt.Fprintf(out, "stopping and deleting the throwaway cluster\n")
	return false, nil
}
