// Command rlmmbench measures the remotestorage managers against the
// database's own limit, at 1M to 10M segments.
//
// It bulk-loads segments with COPY into a database of its own (a throwaway
// local cluster on 127.0.0.1, or a new database on the server of
// DATABASE_URL), then measures every operation at several client counts,
// each next to the raw pgx statement that bounds it (a primary-key SELECT
// of one segment-wide row for reads, a single-row UPDATE commit for writes),
// an open-loop lookup run at fixed arrival rates, lookup latency at 10k
// segments next to the loaded size, the same operations on InMemoryManager,
// and the peak memory of walking a 100k-segment partition with the slice
// list and with the stream. The report is Markdown on stdout (and -out).
//
//	go run ./cmd/rlmmbench                     # 1M segments, ~10 minutes
//	go run ./cmd/rlmmbench -segments 10000000  # 10M
//	go run ./cmd/rlmmbench -soak -soak-duration 5m
//
// See docs/BENCHMARKS.md for the figures, docs/PERFORMANCE.md for what bounds them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgcluster"
	"github.com/krabka/remotestorage/migrations"
)

type config struct {
	segments     int
	small        int
	perPartition int
	clients      []int
	duration     time.Duration
	warmup       time.Duration
	rounds       int
	memDuration  time.Duration
	openLoopDur  time.Duration
	openLoopAt   []float64
	memPartition int
	walkSizes    []int
	loadWorkers  int
	databaseURL  string
	pgConf       map[string]string
	keep         bool
	reuse        bool
	out          string
	skip         map[string]bool

	soak         bool
	soakDuration time.Duration
	soakClients  int
	soakWindow   time.Duration

	walkChild string
	walkDSN   string
	walkShape string
	walkSize  int
}

// mu serialises log lines and progress.
var mu sync.Mutex

func logf(format string, args ...any) {
	mu.Lock()
	defer mu.Unlock()
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05 ")+format+"\n", args...)
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "rlmmbench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second signal kills the process (pgcluster's watchdog still cleans up)
	}()
	switch {
	case cfg.walkChild != "":
		err = walkChild(ctx, cfg)
	case cfg.soak:
		err = withServer(ctx, cfg, runSoak)
	default:
		err = withServer(ctx, cfg, runBench)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rlmmbench:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("rlmmbench", flag.ContinueOnError)
	fs.IntVar(&cfg.segments, "segments", 1_000_000, "segments to load (1k per partition)")
	fs.IntVar(&cfg.small, "small", 10_000, "segments of the small database the lookup latency is compared with")
	fs.IntVar(&cfg.perPartition, "per-partition", 1000, "segments per partition")
	clients := fs.String("clients", "1,8,32", "client counts (pool size = clients)")
	fs.DurationVar(&cfg.duration, "duration", 3*time.Second, "measured time per operation and client count (and as much again for its baseline)")
	fs.IntVar(&cfg.rounds, "rounds", 3, "slices the measured time is cut into, alternating with the baseline's")
	fs.DurationVar(&cfg.warmup, "warmup", time.Second, "warm-up before each measurement (prepares statements, warms caches)")
	fs.DurationVar(&cfg.memDuration, "memory-duration", 2*time.Second, "measured time per InMemoryManager operation")
	fs.DurationVar(&cfg.openLoopDur, "open-loop-duration", 8*time.Second, "duration of each open-loop run")
	openAt := fs.String("open-loop-at", "0.5,0.8", "open-loop arrival rates, as fractions of the closed-loop lookup throughput at the largest client count")
	fs.IntVar(&cfg.memPartition, "memory-partitions", 100, "1k-segment partitions loaded into InMemoryManager (its cost per call depends on the partition, not the total)")
	walk := fs.String("walk-sizes", "1000,10000,100000", "partition sizes walked for peak memory (empty: skip)")
	fs.IntVar(&cfg.loadWorkers, "load-workers", 2, "parallel COPY streams")
	fs.StringVar(&cfg.databaseURL, "database-url", os.Getenv("DATABASE_URL"), "server to use (default $DATABASE_URL; empty: a throwaway local cluster); the benchmark creates and drops its own databases there")
	pgConf := fs.String("pg-conf", "", "postgresql.conf settings for the throwaway cluster, e.g. shared_buffers=128MB,max_wal_size=4GB (default: shared_buffers = a quarter of the memory, at most 8GB)")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the benchmark databases (DATABASE_URL only)")
	fs.BoolVar(&cfg.reuse, "reuse", false, "reuse benchmark databases loaded by an earlier -keep run (DATABASE_URL only)")
	fs.StringVar(&cfg.out, "out", "", "also write the Markdown report to this file")
	skip := fs.String("skip", "", "comma-separated phases to skip: reads,lists,writes,open-loop,scale,memory,walk,proposals")
	fs.BoolVar(&cfg.soak, "soak", false, "run the soak test instead: mixed traffic, per-window percentiles and memory")
	fs.DurationVar(&cfg.soakDuration, "soak-duration", 5*time.Minute, "soak length")
	fs.IntVar(&cfg.soakClients, "soak-clients", 8, "soak clients")
	fs.DurationVar(&cfg.soakWindow, "soak-window", time.Minute, "soak reporting window")
	fs.StringVar(&cfg.walkChild, "walk-child", "", "internal: walk a partition (slice, stream or idle) and print peak memory")
	fs.StringVar(&cfg.walkDSN, "walk-dsn", "", "internal: database of -walk-child")
	fs.StringVar(&cfg.walkShape, "walk-shape", "", "internal: shape name of -walk-child")
	fs.IntVar(&cfg.walkSize, "walk-size", 0, "internal: partition size of -walk-child")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	var err error
	if cfg.clients, err = parseInts(*clients); err != nil || len(cfg.clients) == 0 {
		return cfg, fmt.Errorf("-clients %q: %v", *clients, err)
	}
	if cfg.walkSizes, err = parseInts(*walk); err != nil {
		return cfg, fmt.Errorf("-walk-sizes %q: %v", *walk, err)
	}
	for _, f := range strings.Split(*openAt, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || v <= 0 {
			return cfg, fmt.Errorf("-open-loop-at %q", *openAt)
		}
		cfg.openLoopAt = append(cfg.openLoopAt, v)
	}
	cfg.pgConf = map[string]string{}
	for _, kv := range strings.Split(*pgConf, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return cfg, fmt.Errorf("-pg-conf %q: want key=value", kv)
		}
		cfg.pgConf[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	cfg.skip = map[string]bool{}
	for _, s := range strings.Split(*skip, ",") {
		if s = strings.TrimSpace(s); s != "" {
			cfg.skip[s] = true
		}
	}
	if cfg.segments < cfg.perPartition || cfg.small < 1 {
		return cfg, errors.New("-segments must be at least -per-partition")
	}
	return cfg, nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.Atoi(strings.ReplaceAll(f, "_", ""))
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// server is where the benchmark databases live.
type server struct {
	adminURL  string
	local     *pgcluster.Cluster // nil with DATABASE_URL
	serverPID int
	version   string
	settings  [][2]string
}

// dsn is the admin URL with the database replaced.
func (s *server) dsn(db string) (string, error) {
	u, err := url.Parse(s.adminURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("the server URL must be a postgres:// URL")
	}
	u.Path = "/" + db
	return u.String(), nil
}

// withServer starts a throwaway cluster unless -database-url names a server,
// and runs f.
func withServer(ctx context.Context, cfg config, f func(context.Context, config, *server) error) error {
	srv := &server{adminURL: cfg.databaseURL}
	if srv.adminURL == "" {
		conf := map[string]string{}
		// A quarter of the memory, PostgreSQL's advice for a dedicated
		// server, so that the loaded database is read from shared buffers,
		// not copied in from the OS cache on every miss (pgcluster's own
		// 128MB holds a tenth of 1M segments).
		if mem := memTotalBytes(); mem > 0 {
			conf["shared_buffers"] = fmt.Sprintf("%dMB", min(mem/4, 8<<30)>>20)
		}
		maps.Copy(conf, cfg.pgConf)
		logf("starting a throwaway PostgreSQL cluster (TCP on 127.0.0.1, %v)", conf)
		c, err := pgcluster.Start(ctx, pgcluster.Options{TCP: true, ExtraConf: conf})
		if err != nil {
			return err
		}
		defer func() {
			if err := c.Stop(); err != nil {
				logf("stopping the cluster: %v", err)
			}
		}()
		srv.local = c
		srv.adminURL = c.TCPURL("postgres")
		srv.serverPID = postmasterPID(c.DataDir())
	} else if len(cfg.pgConf) > 0 {
		return errors.New("-pg-conf applies only to the throwaway cluster; configure your server yourself")
	}
	conn, err := pgx.Connect(ctx, srv.adminURL)
	if err != nil {
		return fmt.Errorf("connect to the server: %w", err)
	}
	defer conn.Close(context.Background())
	if srv.serverPID == 0 {
		srv.serverPID = localPostmasterPID(ctx, conn)
	}
	if err := conn.QueryRow(ctx, "SELECT version()").Scan(&srv.version); err != nil {
		return err
	}
	for _, name := range reportedSettings {
		var v string
		if err := conn.QueryRow(ctx, "SELECT current_setting($1, true)", name).Scan(&v); err == nil {
			srv.settings = append(srv.settings, [2]string{name, v})
		}
	}
	return f(ctx, cfg, srv)
}

var reportedSettings = []string{
	"server_version", "synchronous_commit", "fsync", "full_page_writes", "wal_level", "wal_sync_method",
	"commit_delay", "shared_buffers", "effective_cache_size", "work_mem", "max_wal_size",
	"checkpoint_timeout", "random_page_cost", "jit", "plan_cache_mode", "max_connections",
}

// database is one benchmark database: created, migrated and loaded.
type database struct {
	name   string
	dsn    string
	shapes []shape
}

// shapeVersion changes whenever shape.go changes what it generates, so that
// -reuse never measures stale data.
const shapeVersion = "2"

// marker names what a loaded database holds: a database loaded by another
// shape version, under other migrations or with other shapes is not reused.
func (d database) marker() (string, error) {
	hash, err := migrations.Hash()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("v" + shapeVersion + " schema " + hash)
	for _, s := range d.shapes {
		fmt.Fprintf(&b, " %s:%dx%d", s.name, s.partitions, s.perPartition)
	}
	return b.String(), nil
}

// prepareDatabase creates, migrates and loads a database, or reuses one an
// earlier run left with the same marker.
func prepareDatabase(ctx context.Context, cfg config, srv *server, name string, shapes ...shape) (database, func(), error) {
	d := database{name: name, shapes: shapes}
	marker, err := d.marker()
	if err != nil {
		return d, nil, err
	}
	if d.dsn, err = srv.dsn(name); err != nil {
		return d, nil, err
	}
	admin, err := pgx.Connect(ctx, srv.adminURL)
	if err != nil {
		return d, nil, err
	}
	defer admin.Close(context.Background())
	ident := pgx.Identifier{name}.Sanitize()
	drop := func() {
		if cfg.keep && srv.local == nil {
			return
		}
		conn, err := pgx.Connect(context.Background(), srv.adminURL)
		if err == nil {
			_, err = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)")
			conn.Close(context.Background())
		}
		if err != nil {
			logf("drop database %s: %v", name, err)
		}
	}
	if cfg.reuse {
		if pool, err := pgxpool.New(ctx, d.dsn); err == nil {
			var loaded string
			err := pool.QueryRow(ctx, "SELECT marker FROM rlmmbench_loaded").Scan(&loaded)
			if err == nil && loaded == marker {
				logf("reusing database %s (%s)", name, marker)
				err = rs.Migrate(ctx, pool) // migrations added since it was loaded
				if err == nil {
					err = prewarm(ctx, pool)
				}
				pool.Close()
				return d, drop, err
			}
			pool.Close()
		}
	}
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
		return d, nil, err
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return d, nil, fmt.Errorf("create database %s (the user needs CREATEDB): %w", name, err)
	}
	poolCfg, err := pgxpool.ParseConfig(d.dsn)
	if err != nil {
		return d, drop, err
	}
	poolCfg.MaxConns = int32(cfg.loadWorkers + 1)
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return d, drop, err
	}
	defer pool.Close()
	if err := rs.Migrate(ctx, pool); err != nil {
		return d, drop, err
	}
	logf("loading %s: %s", name, marker)
	if err := loadShapes(ctx, pool, cfg.loadWorkers, shapes...); err != nil {
		return d, drop, err
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE rlmmbench_loaded (marker text NOT NULL)"); err != nil {
		return d, drop, err
	}
	if _, err := pool.Exec(ctx, "INSERT INTO rlmmbench_loaded VALUES ($1)", marker); err != nil {
		return d, drop, err
	}
	return d, drop, prewarm(ctx, pool)
}

// openPool opens a pool of exactly n connections, all established, that
// counts statements and names itself for the wait sampler.
func openPool(ctx context.Context, dsn string, n int) (*pgxpool.Pool, *statementCounter, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, nil, err
	}
	counter := &statementCounter{}
	cfg.ConnConfig.Tracer = counter
	cfg.ConnConfig.RuntimeParams["application_name"] = appName
	cfg.MaxConns, cfg.MinConns = int32(n), int32(n)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	// Establish every connection now, not inside the measured window.
	conns := make([]*pgxpool.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range n {
		c, err := pool.Acquire(ctx)
		if err != nil {
			pool.Close()
			return nil, nil, err
		}
		conns = append(conns, c)
	}
	return pool, counter, nil
}

// openAdmin opens a small pool for the probes.
func openAdmin(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 2
	cfg.ConnConfig.RuntimeParams["application_name"] = appName + "-probe"
	return pgxpool.NewWithConfig(ctx, cfg)
}

// memTotalBytes reads MemTotal from /proc/meminfo; 0 when unknown.
func memTotalBytes() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// machine describes the host for the report.
func machine() string {
	mem := "?"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "MemTotal:") {
				f := strings.Fields(line)
				if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
					mem = fmt.Sprintf("%.1f GiB", kb/(1<<20))
				}
			}
		}
	}
	model := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				_, model, _ = strings.Cut(line, ":")
				model = strings.TrimSpace(model)
				break
			}
		}
	}
	return fmt.Sprintf("%d CPUs (%s), %s RAM, %s/%s, %s", runtime.NumCPU(), model, mem, runtime.GOOS, runtime.GOARCH, runtime.Version())
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// tee writes the report to stdout and, with -out, to a file.
func reportWriter(cfg config) (io.Writer, func() error, error) {
	if cfg.out == "" {
		return os.Stdout, func() error { return nil }, nil
	}
	f, err := os.Create(cfg.out)
	if err != nil {
		return nil, nil, err
	}
	return io.MultiWriter(os.Stdout, f), f.Close, nil
}
