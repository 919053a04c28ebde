package main

// daemon.go: what runs: the listener (loopback unless TLS), the pool and
// manager, the gRPC server with its health check and metrics interceptors,
// the /metrics endpoint, and the graceful stop.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/metrics"
	pb "github.com/krabka/remotestorage/proto/remotestorage/v1"
)

// serviceName is the name the health check answers for, beside "".
var serviceName = pb.RemoteLogMetadataService_ServiceDesc.ServiceName

type daemon struct {
	log      *slog.Logger
	cfg      config
	database string // host, port, user and database: never the DSN

	lis        net.Listener
	grpc       *grpc.Server
	health     *health.Server
	metricsLis net.Listener
	metrics    *http.Server

	pool    *pgxpool.Pool
	manager *rs.PgManager
	svc     *service
	pages   *pageReleaser // nil without --release-binary-pages

	serving    prometheus.Gauge // rlmmd_serving: the health status
	stopping   atomic.Bool      // Stop began: the health status stays NOT_SERVING
	stopHealth context.CancelFunc
	wg         sync.WaitGroup
	stopOnce   sync.Once
}

// listenAddress checks the address rule: loopback or a unix socket, unless
// TLS is configured.
func listenAddress(cfg config) (network, address string, err error) {
	if path, ok := strings.CutPrefix(cfg.listen, "unix:"); ok {
		if path == "" {
			return "", "", errors.New("--listen unix: needs a path, e.g. unix:/run/rlmmd/rlmmd.sock")
		}
		return "unix", path, nil
	}
	host, _, err := net.SplitHostPort(cfg.listen)
	if err != nil {
		return "", "", fmt.Errorf("--listen %q: want host:port or unix:/path: %w", cfg.listen, err)
	}
	if cfg.tlsCert == "" && !isLoopback(host) {
		return "", "", fmt.Errorf("--listen %q is not a loopback address: rlmmd serves plaintext only on loopback (127.0.0.1, [::1], localhost) or a unix socket; to listen on %q set --tls-cert and --tls-key (and --tls-client-ca for mutual TLS)", cfg.listen, host)
	}
	return "tcp", cfg.listen, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// serverTLS loads the certificate and, for mutual TLS, the client CA.
func serverTLS(cfg config) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(cfg.tlsCert, cfg.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s / --tls-key %s: %w", cfg.tlsCert, cfg.tlsKey, err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if cfg.tlsClientCA != "" {
		pem, err := os.ReadFile(cfg.tlsClientCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-client-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-client-ca %s: no PEM certificate in it", cfg.tlsClientCA)
		}
		tc.ClientCAs = pool
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

// start checks the configuration, connects to the database (retrying while
// it does not answer, until ctx ends), then listens and serves.
func start(ctx context.Context, cfg config, log *slog.Logger) (_ *daemon, err error) {
	network, address, err := listenAddress(cfg)
	if err != nil {
		return nil, err
	}
	var creds credentials.TransportCredentials
	if cfg.tlsCert != "" {
		tc, err := serverTLS(cfg)
		if err != nil {
			return nil, err
		}
		creds = credentials.NewTLS(tc)
	}
	poolCfg, err := pgxpool.ParseConfig(cfg.databaseURL)
	if err != nil {
		return nil, fmt.Errorf("the database from %s: %w", cfg.databaseFrom, err) // pgconn redacts the password
	}
	rs.ConfigurePool(poolCfg)
	if cfg.maxConns > 0 {
		poolCfg.MaxConns = int32(cfg.maxConns)
	}
	d := &daemon{log: log, cfg: cfg, database: fmt.Sprintf("host=%s port=%d user=%s database=%s (from %s)",
		poolCfg.ConnConfig.Host, poolCfg.ConnConfig.Port, poolCfg.ConnConfig.User, poolCfg.ConnConfig.Database, cfg.databaseFrom)}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	if d.pool, err = pgxpool.NewWithConfig(ctx, poolCfg); err != nil {
		return nil, fmt.Errorf("the database %s: %w", d.database, err)
	}
	if d.manager, err = d.newManager(ctx); err != nil {
		return nil, err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	im := metrics.Instrument(d.manager, metrics.WithRegisterer(reg), metrics.WithPoolStats("primary", d.pool), metrics.WithLogger(log))
	calls := newCallMetrics(reg)
	stuck, err := metrics.NewStuckCollector(d.pool, cfg.stuckOlderThan)
	if err != nil {
		return nil, fmt.Errorf("--stuck-older-than: %w", err)
	}
	reg.MustRegister(stuck)
	d.serving = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "rlmmd", Name: "serving",
		Help: "1 while the health check says SERVING (the database answered its last ping), 0 otherwise.",
	})
	reg.MustRegister(d.serving)

	opts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(calls.unary),
		grpc.ChainStreamInterceptor(calls.stream),
		// Brokers keep one connection for their life; let their keepalive
		// pings through.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	}
	if creds != nil {
		opts = append(opts, grpc.Creds(creds))
	}
	d.grpc = grpc.NewServer(opts...)
	if cfg.releasePages {
		d.pages = newPageReleaser(log, d.manager.CaughtUp) // not im: its polls are not calls to count
	}
	d.svc = &service{m: im, pages: d.pages}
	pb.RegisterRemoteLogMetadataServiceServer(d.grpc, d.svc)
	d.health = health.NewServer()
	healthpb.RegisterHealthServer(d.grpc, d.health)

	if network == "unix" {
		_ = os.Remove(address) // a socket left by a previous run that died
	}
	if d.lis, err = net.Listen(network, address); err != nil {
		return nil, fmt.Errorf("--listen %s: %w", cfg.listen, err)
	}
	if cfg.metricsListen != "" {
		if d.metricsLis, err = net.Listen("tcp", cfg.metricsListen); err != nil {
			return nil, fmt.Errorf("--metrics-listen %s: %w", cfg.metricsListen, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
		d.metrics = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		d.wg.Go(func() {
			if err := d.metrics.Serve(d.metricsLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("rlmmd: metrics endpoint stopped", "err", err)
			}
		})
	}

	d.setServing(ctx)
	hctx, cancel := context.WithCancel(context.Background())
	d.stopHealth = cancel
	d.wg.Go(func() { d.watchHealth(hctx) })
	if d.pages != nil {
		d.wg.Go(func() { d.pages.run(hctx) })
	}
	d.wg.Go(func() {
		if err := d.grpc.Serve(d.lis); err != nil {
			log.Error("rlmmd: gRPC server stopped", "err", err)
		}
	})
	return d, nil
}

// newManager migrates the database when --migrate says so, then opens the
// manager, waiting for a database that does not answer yet. A schema that
// is not migrated, a server too old, or a refusal by the server (such as a
// role without the privileges a migration needs) ends the wait at once.
func (d *daemon) newManager(ctx context.Context) (*rs.PgManager, error) {
	wait := 100 * time.Millisecond
	migrated := !d.cfg.migrate
	for {
		var m *rs.PgManager
		err := func() error {
			if !migrated {
				if err := rs.Migrate(ctx, d.pool); err != nil {
					return fmt.Errorf("migrate: %w", err)
				}
				migrated = true
				d.log.Info("rlmmd: the database schema is current", "database", d.database, "schema_version", rs.SchemaVersion)
			}
			var err error
			m, err = rs.NewPgManager(ctx, d.pool, rs.WithCache(), rs.WithLogger(d.log), rs.WithForgottenRetention(d.cfg.retention))
			return err
		}()
		if err == nil {
			return m, nil
		}
		if refusedForGood(err) || ctx.Err() != nil {
			return nil, fmt.Errorf("the database %s: %w", d.database, err)
		}
		d.log.Warn("rlmmd: the database does not answer yet; retrying", "database", d.database, "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the database %s: %w", d.database, err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// refusedForGood reports whether waiting cannot help err: the schema is not
// at this rlmmd's version, the server is too old, or the server refused a
// statement on a connection it accepted (permissions, a bad database name).
// A server that does not answer, or answers that it is starting or
// stopping, is waited for.
func refusedForGood(err error) bool {
	if errors.Is(err, rs.ErrSchemaMismatch) || errors.Is(err, rs.ErrServerVersion) {
		return true
	}
	var connect *pgconn.ConnectError
	if errors.As(err, &connect) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 57 (operator intervention: shutting down, starting up,
		// cancelled) and 08 (connection) pass; the rest is the server's answer.
		return !strings.HasPrefix(pgErr.Code, "57") && !strings.HasPrefix(pgErr.Code, "08") && pgErr.Code != "53300"
	}
	return false
}

// setServing sets the health status from one ping of the database.
func (d *daemon) setServing(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, d.cfg.healthInterval)
	defer cancel()
	st := healthpb.HealthCheckResponse_SERVING
	if err := d.pool.Ping(pctx); err != nil {
		st = healthpb.HealthCheckResponse_NOT_SERVING
	}
	d.health.SetServingStatus("", st)
	d.health.SetServingStatus(serviceName, st)
	if st == healthpb.HealthCheckResponse_SERVING && !d.stopping.Load() {
		d.serving.Set(1)
	} else {
		d.serving.Set(0)
	}
}

func (d *daemon) watchHealth(ctx context.Context) {
	t := time.NewTicker(d.cfg.healthInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			d.setServing(ctx)
		}
	}
}

// Addr is the gRPC listener's address.
func (d *daemon) Addr() string { return d.lis.Addr().String() }

// MetricsAddr is the metrics listener's address, "" when off.
func (d *daemon) MetricsAddr() string {
	if d.metricsLis == nil {
		return ""
	}
	return d.metricsLis.Addr().String()
}

// Stop stops gracefully: the health check says NOT_SERVING, new calls are
// refused, in-flight calls get up to --shutdown-timeout to finish (then they
// are cut), and the manager sends its queued notifications before the pool
// closes.
func (d *daemon) Stop() {
	d.stopOnce.Do(func() {
		d.stopping.Store(true)
		if d.health != nil {
			d.health.Shutdown()
			d.serving.Set(0)
		}
		if d.grpc != nil {
			done := make(chan struct{})
			go func() {
				d.grpc.GracefulStop()
				close(done)
			}()
			t := time.NewTimer(d.cfg.shutdownTimeout)
			select {
			case <-done:
				t.Stop()
			case <-t.C:
				d.log.Warn("rlmmd: in-flight calls outlived --shutdown-timeout; cutting them", "shutdown_timeout", d.cfg.shutdownTimeout)
				d.grpc.Stop()
				<-done
			}
		}
		d.close()
	})
}

// close releases what start opened, in reverse order.
func (d *daemon) close() {
	if d.stopHealth != nil {
		d.stopHealth()
	}
	if d.metrics != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = d.metrics.Shutdown(ctx)
		cancel()
	} else if d.metricsLis != nil {
		d.metricsLis.Close()
	}
	if d.grpc == nil && d.lis != nil {
		d.lis.Close()
	}
	d.wg.Wait()
	if d.manager != nil {
		d.manager.Close()
	}
	if d.pool != nil {
		d.pool.Close()
	}
}

// callMetrics counts and times the gRPC calls by method and status code.
type callMetrics struct {
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newCallMetrics(reg prometheus.Registerer) *callMetrics {
	m := &callMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rlmmd", Name: "grpc_calls_total",
			Help: "gRPC calls served, by method and status code.",
		}, []string{"method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "rlmmd", Name: "grpc_call_duration_seconds",
			Help:    "Duration of the gRPC calls served, by method, successful or not.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"method"}),
	}
	reg.MustRegister(m.calls, m.duration)
	return m
}

func (m *callMetrics) observe(method string, start time.Time, err error) {
	name := method[strings.LastIndexByte(method, '/')+1:]
	m.calls.WithLabelValues(name, status.Code(err).String()).Inc()
	m.duration.WithLabelValues(name).Observe(time.Since(start).Seconds())
}

func (m *callMetrics) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	m.observe(info.FullMethod, start, err)
	return resp, err
}

func (m *callMetrics) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	start := time.Now()
	err := handler(srv, ss)
	m.observe(info.FullMethod, start, err)
	return err
}
