// Command rlmmd serves the remotestorage library's manager over gRPC
// (proto/remotestorage/v1), so that a Kafka broker's RemoteLogMetadataManager
// plugin (kafka/) keeps its tiered-storage metadata in PostgreSQL.
//
// One rlmmd per broker host, on loopback or a unix socket, is the usual
// deployment: its cache then holds the partitions of that broker. One rlmmd
// shared by a cluster also works; it must then listen with TLS. See
// docs/KAFKA.md.
//
// It runs a PgManager with WithCache; a health check (grpc.health.v1) says
// SERVING while the database answers; Prometheus metrics are served over
// HTTP; SIGTERM or SIGINT stops it gracefully: in-flight calls finish, and
// queued change notifications are sent, before it exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	rs "github.com/krabka/remotestorage"
)

// version names the build: set by the linker (-X main.version=...) when the
// Kafka plugin's build puts rlmmd into its jar, which refuses an rlmmd of
// another version; "dev" otherwise.
var version = "dev"

// Defaults of the flags.
const (
	defaultListen          = "127.0.0.1:9190"
	defaultMetricsListen   = "127.0.0.1:9191"
	defaultShutdownTimeout = 30 * time.Second
	defaultHealthInterval  = 5 * time.Second
)

const usageHeader = `rlmmd serves Kafka tiered-storage metadata (KIP-405) from PostgreSQL over gRPC.

Usage: rlmmd [flags]

The database is, in this order: --database-url; else DATABASE_URL; else the
libpq environment variables PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE,
PGSSLMODE, … (and ~/.pgpass). Passwords are never logged: the database is
named by host, port, user and database only. With --require-database-url
(RLMMD_REQUIRE_DATABASE_URL=true, as the image and the systemd unit set it)
there is no fallback: without --database-url or DATABASE_URL rlmmd exits at
once.

--health-probe asks the rlmmd at --listen (RLMMD_LISTEN) whether it is
SERVING and exits 0 if so, 1 if not: a health check for containers, where
there is no shell. It uses --tls-cert as the only certificate it trusts,
and --health-probe-cert/--health-probe-key for mutual TLS.

Every flag can also be set by the environment variable named after it
(RLMMD_ and the flag in upper case with _ for -, e.g. RLMMD_LISTEN); a flag
given on the command line wins.

rlmmd listens on loopback by default. A non-loopback --listen is refused
unless --tls-cert and --tls-key are set; --tls-client-ca makes it mutual TLS
(clients must present a certificate signed by that CA).

Flags:
`

// config is everything rlmmd is told.
type config struct {
	listen          string // host:port, or unix:/path
	databaseURL     string
	databaseFrom    string // where databaseURL came from, for messages
	tlsCert         string
	tlsKey          string
	tlsClientCA     string
	metricsListen   string // "" turns the metrics endpoint off
	shutdownTimeout time.Duration
	healthInterval  time.Duration
	maxConns        int
	logLevel        slog.Level
	migrate         bool  // migrate the database before serving
	stopOnStdinEOF  bool  // stop when standard input reaches its end
	memoryLimit     int64 // the Go runtime's soft memory limit in bytes; 0: GOMEMLIMIT's or none
	releasePages    bool  // drop the binary's pages after the start and the loads (pages.go)
	showVersion     bool
	requireURL      bool          // refuse to start without --database-url or DATABASE_URL
	stuckOlderThan  time.Duration // what rlmm_stuck_segments and rlmm_stuck_partitions count
	retention       time.Duration // how long forgotten segments are kept before the purge
	healthProbe     bool          // probe a running rlmmd's health check and exit (probe.go)
	probeCert       string        // the probe's client certificate, for mutual TLS
	probeKey        string
	probeTimeout    time.Duration
}

// parseConfig reads flags, then fills what they left unset from the
// environment (getenv). A bad value names the flag or variable it came from.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("rlmmd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usageHeader)
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.listen, "listen", defaultListen, "gRPC address: host:port, or unix:/path/to/socket")
	fs.StringVar(&cfg.databaseURL, "database-url", "", "PostgreSQL DSN (else DATABASE_URL, else the PG* variables)")
	fs.StringVar(&cfg.tlsCert, "tls-cert", "", "PEM certificate of the gRPC server (turns TLS on, with --tls-key)")
	fs.StringVar(&cfg.tlsKey, "tls-key", "", "PEM private key of the gRPC server")
	fs.StringVar(&cfg.tlsClientCA, "tls-client-ca", "", "PEM CA that client certificates must be signed by (mutual TLS)")
	fs.StringVar(&cfg.metricsListen, "metrics-listen", defaultMetricsListen, `Prometheus /metrics HTTP address ("" turns it off)`)
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", defaultShutdownTimeout, "how long a graceful stop waits for in-flight calls before cutting them")
	fs.DurationVar(&cfg.healthInterval, "health-interval", defaultHealthInterval, "how often the health check pings the database")
	fs.IntVar(&cfg.maxConns, "db-max-conns", 0, "connections of the pool (0: pgx's default, max(4, CPUs))")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	fs.BoolVar(&cfg.migrate, "migrate", false, "migrate the database to this rlmmd's schema before serving (idempotent; several rlmmd may race)")
	fs.BoolVar(&cfg.stopOnStdinEOF, "stop-on-stdin-eof", false, "stop gracefully when standard input reaches its end: a parent holding a pipe to it (the Kafka plugin) then stops rlmmd by dying, however it dies")
	memoryLimit := fs.String("memory-limit", "", "soft limit of the Go runtime's memory, e.g. 64MiB (as GOMEMLIMIT, which applies when this is unset)")
	fs.BoolVar(&cfg.releasePages, "release-binary-pages", false, "after the start, and after each change of the partitions once they are loaded, ask the kernel to drop the pages of rlmmd's binary that only it maps (Linux; the Kafka plugin's embedded rlmmd sets it)")
	fs.BoolVar(&cfg.showVersion, "version", false, "print the version and exit")
	fs.BoolVar(&cfg.requireURL, "require-database-url", false, "refuse to start unless --database-url or DATABASE_URL names the database (no fallback to the PG* variables); the image and the systemd unit set it")
	fs.DurationVar(&cfg.stuckOlderThan, "stuck-older-than", time.Hour, "work in flight for longer than this counts as stuck in rlmm_stuck_segments and rlmm_stuck_partitions (read from the database at each scrape)")
	fs.DurationVar(&cfg.retention, "forgotten-retention", rs.DefaultForgottenRetention, "how long a forgotten segment is kept before the background purge deletes it (0 turns the purge off)")
	fs.BoolVar(&cfg.healthProbe, "health-probe", false, "probe the health check of the rlmmd at --listen (with its TLS settings) and exit: 0 when it answers SERVING, 1 otherwise (the image's HEALTHCHECK; never read from the environment)")
	fs.StringVar(&cfg.probeCert, "health-probe-cert", "", "PEM client certificate of --health-probe, when rlmmd asks for one (--tls-client-ca)")
	fs.StringVar(&cfg.probeKey, "health-probe-key", "", "PEM private key of --health-probe-cert")
	fs.DurationVar(&cfg.probeTimeout, "health-probe-timeout", 5*time.Second, "how long --health-probe waits for the answer")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("rlmmd takes no arguments, got %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || f.Name == "database-url" || f.Name == "health-probe" {
			return
		}
		name := "RLMMD_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := lookup(getenv, name); ok {
			if err := f.Value.Set(v); err != nil && envErr == nil {
				envErr = fmt.Errorf("%s=%q: %w", name, v, err)
			}
		}
	})
	if envErr != nil {
		return config{}, envErr
	}
	switch {
	case cfg.databaseURL != "":
		cfg.databaseFrom = "--database-url"
	case getenv("DATABASE_URL") != "":
		cfg.databaseURL, cfg.databaseFrom = getenv("DATABASE_URL"), "DATABASE_URL"
	case cfg.requireURL && !cfg.healthProbe:
		return config{}, errors.New("no database: --require-database-url is set, and neither --database-url nor DATABASE_URL names one")
	default:
		cfg.databaseFrom = "the PG* environment variables"
	}
	if *memoryLimit != "" {
		n, err := parseSize(*memoryLimit)
		if err != nil {
			return config{}, fmt.Errorf("--memory-limit %q: %w", *memoryLimit, err)
		}
		cfg.memoryLimit = n
	}
	if err := cfg.logLevel.UnmarshalText([]byte(*level)); err != nil {
		return config{}, fmt.Errorf("--log-level %q: want debug, info, warn or error", *level)
	}
	if (cfg.tlsCert == "") != (cfg.tlsKey == "") {
		return config{}, errors.New("--tls-cert and --tls-key go together: set both or neither")
	}
	if cfg.tlsClientCA != "" && cfg.tlsCert == "" {
		return config{}, errors.New("--tls-client-ca needs --tls-cert and --tls-key: mutual TLS is TLS first")
	}
	if cfg.shutdownTimeout <= 0 {
		return config{}, fmt.Errorf("--shutdown-timeout %s: must be positive", cfg.shutdownTimeout)
	}
	if cfg.healthInterval <= 0 {
		return config{}, fmt.Errorf("--health-interval %s: must be positive", cfg.healthInterval)
	}
	if cfg.stuckOlderThan < 0 {
		return config{}, fmt.Errorf("--stuck-older-than %s: must be 0 or more", cfg.stuckOlderThan)
	}
	if cfg.retention < 0 {
		return config{}, fmt.Errorf("--forgotten-retention %s: must be 0 or more", cfg.retention)
	}
	if (cfg.probeCert == "") != (cfg.probeKey == "") {
		return config{}, errors.New("--health-probe-cert and --health-probe-key go together: set both or neither")
	}
	if cfg.probeTimeout <= 0 {
		return config{}, fmt.Errorf("--health-probe-timeout %s: must be positive", cfg.probeTimeout)
	}
	if cfg.maxConns < 0 {
		return config{}, fmt.Errorf("--db-max-conns %d: must be 0 or more", cfg.maxConns)
	}
	return cfg, nil
}

// parseSize reads a byte count with an optional binary suffix (B, KiB,
// MiB, GiB), as GOMEMLIMIT writes it.
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		factor int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	factor := int64(1)
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			s, factor = n, u.factor
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/factor {
		return 0, errors.New("want a positive byte count, optionally with KiB, MiB or GiB")
	}
	return n * factor, nil
}

func lookup(getenv func(string) string, name string) (string, bool) {
	v := getenv(name)
	return v, v != ""
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	cfg, err := parseConfig(args, os.Getenv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rlmmd:", err)
		return 2
	}
	if cfg.showVersion {
		fmt.Println("rlmmd", version)
		return 0
	}
	if cfg.healthProbe {
		return probe(cfg, os.Stdout)
	}
	if cfg.memoryLimit > 0 {
		debug.SetMemoryLimit(cfg.memoryLimit)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if cfg.stopOnStdinEOF {
		ctx = stopAtEOF(ctx, os.Stdin, logger)
	}
	srv, err := start(ctx, cfg, logger)
	if err != nil {
		logger.Error("rlmmd: cannot start", "err", err)
		return 1
	}
	logger.Info("rlmmd: serving", "listen", srv.Addr(), "metrics", srv.MetricsAddr(), "database", srv.database, "pid", strconv.Itoa(os.Getpid()), "version", version)
	<-ctx.Done()
	logger.Info("rlmmd: stopping", "shutdown_timeout", cfg.shutdownTimeout)
	srv.Stop()
	logger.Info("rlmmd: stopped")
	return 0
}

// stopAtEOF returns a context that ends with ctx or when r reaches its end
// (or fails): a parent holding the other end of a pipe closes it by exiting,
// killed or not, which no signal reports to a child of a JVM.
func stopAtEOF(ctx context.Context, r io.Reader, log *slog.Logger) context.Context {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		_, err := io.Copy(io.Discard, r)
		log.Info("rlmmd: standard input closed: the parent is gone; stopping", "err", err)
		cancel()
	}()
	return ctx
}
