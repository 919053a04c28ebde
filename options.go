package remotestorage

// options.go: every option of the package, by what it configures: the
// managers (Option), Instrument (InstrumentOption), the pool (PoolOption)
// and the stuck-work collector (StuckCollectorOption).

import (
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// Option configures a manager.
type Option func(*options)

type options struct {
	maxCustomMetadataBytes int
	readReplica            *pgxpool.Pool // PgManager only: where queries go
	cache                  bool          // PgManager only: keep consumed partitions in memory
	logger                 *slog.Logger  // WithLogger; nil: none
	cachePoll              time.Duration // WithCachePollInterval
	cachePollSet           bool
	cacheLoaders           int // WithCacheLoaders; 0: half the pool

	listenerConnConfig *pgx.ConnConfig // PgManager cache only: WithListenerConnConfig; nil: the pool's

	forgottenRetention    time.Duration // WithForgottenRetention (purge.go)
	forgottenRetentionSet bool
	purgeBatchSize        int // WithPurgeBatchSize; 0: the default
}

// DefaultMaxCustomMetadataBytes is the custom metadata limit when
// WithMaxCustomMetadataBytes is not given.
const DefaultMaxCustomMetadataBytes = 65536

func newOptions(opts []Option) options {
	o := options{maxCustomMetadataBytes: DefaultMaxCustomMetadataBytes}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithMaxCustomMetadataBytes sets the largest CustomMetadata accepted by adds
// and updates (default 65536 bytes).
func WithMaxCustomMetadataBytes(n int) Option {
	return func(o *options) { o.maxCustomMetadataBytes = n }
}

// WithLogger sets the structured logger. Passed to Instrument, it receives
// one record per failed call: refused writes and ErrNotReady at Debug,
// store failures at Warn, with the operation, the partition and, for
// writes, the segment. Records carry no DSN or password: pgx's errors name
// the host, user and database, never the password. Passed to NewPgManager or
// NewInMemoryManager, the managers keep it for what they do outside a call;
// their calls do not log (wrap the manager with Instrument for that).
// Default: no logging.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger = l }
}

// WithReadReplica sends queries (not writes) to replica, a hot standby of the
// primary the manager's pool points at. CaughtUp(tp) then reads tp's
// committed version on the primary first, then on the replica, and is true
// only when the replica has reached it.
func WithReadReplica(replica *pgxpool.Pool) Option {
	return func(o *options) { o.readReplica = replica }
}

// WithCache keeps the partitions this manager consumes (see
// OnPartitionLeadershipChanges) in memory, fresh through LISTEN/NOTIFY: their
// queries are answered with no round trip. Until a partition is loaded its
// queries and CaughtUp fail with ErrNotReady.
func WithCache() Option {
	return func(o *options) { o.cache = true }
}

// DefaultCachePollInterval is how often a cache checks, in one statement,
// the committed versions of every partition it holds, when
// WithCachePollInterval is not given.
const DefaultCachePollInterval = time.Second

// WithCachePollInterval sets how often the cache (WithCache) reads the
// committed versions of all its partitions in one statement, and catches
// up those behind. Notifications make the cache fresh within milliseconds;
// the poll bounds how long a lost one (a writer that died between its
// commit and its notification, a listener that cannot listen, as behind a
// transaction pooler) can leave the cache behind: about one interval plus a
// catch-up. Zero or less turns the poll off.
func WithCachePollInterval(d time.Duration) Option {
	return func(o *options) { o.cachePoll, o.cachePollSet = d, true }
}

// WithCacheLoaders sets how many partitions the cache (WithCache) loads or
// catches up at once, each on one connection of the manager's pool. The
// default is half the pool's MaxConns (at least 1), so that a broker
// assigned many partitions at once keeps connections for its own calls:
// loading 1,000 partitions on all four connections of a pool held the
// broker's writes up to 0.4 s at p99 (BenchmarkCacheReady1M).
func WithCacheLoaders(n int) Option {
	return func(o *options) { o.cacheLoaders = n }
}

// WithListenerConnConfig gives the cache's listener (WithCache) a
// connection of its own to the primary, made from cfg, instead of one made
// from the manager's pool's settings. Use it when the pool goes through a
// transaction pooler (PgBouncer in pool_mode=transaction): there a LISTEN
// holds only for the one transaction that ran it, and notifications reach
// no one. cfg must reach the primary directly, or through a pooler in
// session mode; parse it with pgx.ParseConfig. The manager copies it.
//
// Without it, the listener checks at each connect that it hears a probe
// notification sent through the pool, and logs a warning (WithLogger, else
// slog's default logger) when it does not. The cache stays correct either
// way: without notifications, freshness falls back to the periodic version
// poll and CaughtUp, which compares versions and has a stale partition
// catch up.
func WithListenerConnConfig(cfg *pgx.ConnConfig) Option {
	return func(o *options) { o.listenerConnConfig = cfg.Copy() }
}

// InstrumentOption configures Instrument. Every Option is one too, and
// Instrument takes WithLogger from it; the managers' other options mean
// nothing to Instrument and are ignored.
type InstrumentOption interface {
	applyInstrument(*instrumentConfig)
}

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

type instrumentOptionFunc func(*instrumentConfig)

func (f instrumentOptionFunc) applyInstrument(c *instrumentConfig) { f(c) }

func (o Option) applyInstrument(c *instrumentConfig) {
	var opts options
	o(&opts)
	if opts.logger != nil {
		c.logger = opts.logger
	}
}

// WithRegisterer registers the InstrumentedManager's metrics with r (for
// example prometheus.DefaultRegisterer). Without it nothing is registered:
// the InstrumentedManager is a prometheus.Collector, to register where and
// when you like.
func WithRegisterer(r prometheus.Registerer) InstrumentOption {
	return instrumentOptionFunc(func(c *instrumentConfig) { c.registerer = r })
}

// WithConstLabels adds labels to every metric, for example
// {"cluster": "a"} when one process instruments managers of several
// clusters: metrics that differ in a constant label can share a registry.
func WithConstLabels(l prometheus.Labels) InstrumentOption {
	return instrumentOptionFunc(func(c *instrumentConfig) { c.constLabels = l })
}

// WithPoolStats exports the statistics of pool (pgxpool.Stat) under the
// label pool=name: connections by state and the acquire counters, read when
// the metrics are collected. Give it once per pool, e.g. "primary" and
// "replica" for a manager with WithReadReplica.
func WithPoolStats(name string, pool *pgxpool.Pool) InstrumentOption {
	return instrumentOptionFunc(func(c *instrumentConfig) { c.pools = append(c.pools, namedPool{name, pool}) })
}

// PoolOption configures ConfigurePool and NewPool.
type PoolOption func(*poolOptions)

type poolOptions struct {
	backoffMin, backoffMax time.Duration
}

// WithConnectBackoff sets the pause after a failed connection attempt: min
// after the first, doubling up to max.
func WithConnectBackoff(min, max time.Duration) PoolOption {
	return func(o *poolOptions) { o.backoffMin, o.backoffMax = min, max }
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
