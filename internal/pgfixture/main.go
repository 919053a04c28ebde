// Command pgfixture runs a throwaway PostgreSQL for tests written in other
// languages (the Kafka plugin's and the Rust crates' tests), from the same
// server binaries the Go tests use (package pgcluster): the embedded
// PostgreSQL of RLMM_PG_VERSION (default the newest), or the machine's own
// with RLMM_PG_SERVER=system. It names the server on standard error.
//
// It starts the cluster on 127.0.0.1 at a free port, then reads commands on
// stdin, one per line, and answers each with one line on stdout:
//
//	db NAME     create database NAME, migrated  -> "DSN <url>"
//	empty NAME  create database NAME, empty     -> "DSN <url>"
//	stop        stop the server (fast shutdown) -> "OK"
//	start       start it again                  -> "OK"
//
// A failed command answers "ERR <message>". At the end of stdin, or on
// SIGTERM, it stops the server and deletes the cluster.
package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgcluster"
)

var dbName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

const commandTimeout = 2 * time.Minute

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	c, err := pgcluster.Start(ctx, pgcluster.Options{TCP: true, ExtraConf: map[string]string{"fsync": "off", "synchronous_commit": "off"}})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgfixture:", err)
		os.Exit(1)
	}
	defer func() {
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgfixture: stop:", err)
		}
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	fmt.Fprintf(os.Stderr, "pgfixture: PostgreSQL from %s on %s\n", c.BinDir(), c.TCPAddr())
	fmt.Println("READY", c.TCPAddr())
	for {
		select {
		case <-sig:
			return
		case line, ok := <-lines:
			if !ok {
				return
			}
			if err := handle(c, strings.Fields(line)); err != nil {
				fmt.Println("ERR", strings.ReplaceAll(err.Error(), "\n", " "))
			}
		}
	}
}

func handle(c *pgcluster.Cluster, args []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	switch {
	case len(args) == 2 && (args[0] == "db" || args[0] == "empty"):
		if !dbName.MatchString(args[1]) {
			return fmt.Errorf("database name %q: want lower-case letters, digits and _", args[1])
		}
		admin, err := pgxpool.New(ctx, c.TCPURL("postgres"))
		if err != nil {
			return err
		}
		_, err = admin.Exec(ctx, "CREATE DATABASE "+args[1])
		admin.Close()
		if err != nil {
			return err
		}
		if args[0] == "empty" {
			fmt.Println("DSN", c.TCPURL(args[1]))
			return nil
		}
		pool, err := pgxpool.New(ctx, c.TCPURL(args[1]))
		if err != nil {
			return err
		}
		defer pool.Close()
		if err := rs.Migrate(ctx, pool); err != nil {
			return err
		}
		fmt.Println("DSN", c.TCPURL(args[1]))
	case len(args) == 1 && args[0] == "stop":
		if err := c.Shutdown(ctx, pgcluster.Fast); err != nil {
			return err
		}
		fmt.Println("OK")
	case len(args) == 1 && args[0] == "start":
		if err := c.Startup(ctx); err != nil {
			return err
		}
		fmt.Println("OK")
	default:
		return fmt.Errorf("unknown command %q: want db NAME, empty NAME, stop or start", strings.Join(args, " "))
	}
	return nil
}
