package metrics

// options.go: the options of Instrument (InstrumentOption) and of the
// stuck-work collector (StuckCollectorOption).

import (
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// InstrumentOption configures Instrument.
type InstrumentOption func(*instrumentConfig)

type instrumentConfig struct {
	logger      *slog.Logger
	registerer  prometheus.Registerer
	constLabels prometheus.Labels
	pools       []namedPool
}

type namedPool struct {
	name string
	pool *pgxpool.Pool
}

// WithLogger sets the logger of the InstrumentedManager: one record per
// failed call, refused writes and ErrNotReady at Debug, store failures at
// Warn, with the operation, the partition and, for writes, the segment.
// Records carry no DSN or password: pgx's errors name the host, user and
// database, never the password. Default: no logging.
func WithLogger(l *slog.Logger) InstrumentOption {
	return func(c *instrumentConfig) { c.logger = l }
}

// WithRegisterer registers the InstrumentedManager's metrics with r (for
// example prometheus.DefaultRegisterer). Without it nothing is registered:
// the InstrumentedManager is a prometheus.Collector, to register where and
// when you like.
func WithRegisterer(r prometheus.Registerer) InstrumentOption {
	return func(c *instrumentConfig) { c.registerer = r }
}

// WithConstLabels adds labels to every metric, for example
// {"cluster": "a"} when one process instruments managers of several
// clusters: metrics that differ in a constant label can share a registry.
func WithConstLabels(l prometheus.Labels) InstrumentOption {
	return func(c *instrumentConfig) { c.constLabels = l }
}

// WithPoolStats exports the statistics of pool (pgxpool.Stat) under the
// label pool=name: connections by state and the acquire counters, read when
// the metrics are collected. Give it once per pool, e.g. "primary" and
// "replica" for a manager with WithReadReplica.
func WithPoolStats(name string, pool *pgxpool.Pool) InstrumentOption {
	return func(c *instrumentConfig) { c.pools = append(c.pools, namedPool{name, pool}) }
}

// StuckCollectorOption configures NewStuckCollector.
type StuckCollectorOption func(*StuckCollector)

// WithStuckScrapeTimeout bounds the query of one scrape (default 5s).
func WithStuckScrapeTimeout(d time.Duration) StuckCollectorOption {
	return func(c *StuckCollector) { c.timeout = d }
}

// WithStuckConstLabels adds constant labels to both gauges (e.g. the cluster).
func WithStuckConstLabels(labels prometheus.Labels) StuckCollectorOption {
	return func(c *StuckCollector) {
		c.segments = newStuckSegmentsDesc(labels)
		c.parts = newStuckPartitionsDesc(labels)
	}
}
