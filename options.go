package remotestorage

// options.go: the options of the managers (Option) and of the pool
// (PoolOption), with the managers' defaults, but for the purge's
// (DefaultForgottenRetention, DefaultPurgeBatchSize), which live with the
// purge in purge.go. The pool's defaults (DefaultConnectBackoffMin,
// …) are with ConfigurePool in pool.go, and the options of the metrics
// (metrics.Instrument, metrics.NewStuckCollector) in package metrics.

import (
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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

	forgottenRetention    time.Duration // WithForgottenRetention
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

// WithLogger sets the structured logger the managers use for what they do
// outside a call (the cache's listener and loaders, for example). Their
// calls do not log: wrap the manager with metrics.Instrument for one record
// per failed call. Default: no logging.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger = l }
}

// WithReadReplica sends queries (not writes) to replica, a hot standby of the
// primary the manager's pool points at. CaughtUp(tp) then reads what the
// replica has of tp, then compares it with tp's committed writes on the
// primary, and is true only when the replica has every one of them.
func WithReadReplica(replica *pgxpool.Pool) Option {
	return func(o *options) { o.readReplica = replica }
}

// WithCache keeps the partitions this manager consumes (see
// OnPartitionLeadershipChanges) in memory: their queries are answered with
// no round trip. Until a partition is loaded its queries and CaughtUp fail
// with ErrNotReady. How it stays fresh: docs/SCALING.md, "How the cache
// stays fresh".
func WithCache() Option {
	return func(o *options) { o.cache = true }
}

// DefaultCachePollInterval is how often a cache asks, in one statement,
// which partitions it holds have writes it has not read, when
// WithCachePollInterval is not given.
const DefaultCachePollInterval = time.Second

// WithCachePollInterval sets how often the cache (WithCache) asks, in one
// statement, which of its partitions have writes it has not read, and
// catches up those: the bound on what a lost notification costs (see
// docs/SCALING.md, "How the cache stays fresh"). Zero or less turns the
// poll off.
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
// slog's default logger) when it does not; what the cache then relies on is
// in docs/SCALING.md, "How the cache stays fresh".
func WithListenerConnConfig(cfg *pgx.ConnConfig) Option {
	return func(o *options) { o.listenerConnConfig = cfg.Copy() }
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

// WithForgottenRetention sets how long a forgotten segment (one in
// DELETE_SEGMENT_FINISHED, or any segment of a partition in
// DELETE_PARTITION_FINISHED) is kept, counted from the write that made it
// so. Each PgManager purges in the background what was forgotten longer ago
// than d, a bounded batch at a time, with brokers not repeating each other's
// work. Default 168h (7 days); 0 turns it off, and then ids stay taken until
// PurgeForgotten or an operator deletes them. An InMemoryManager purges by
// the same rule, as it writes. A negative d is taken as 0.
func WithForgottenRetention(d time.Duration) Option {
	return func(o *options) { o.forgottenRetention, o.forgottenRetentionSet = max(d, 0), true }
}

// WithPurgeBatchSize sets how many segments one purge transaction deletes at
// most (default DefaultPurgeBatchSize). Values below 1 are taken as 1.
func WithPurgeBatchSize(n int) Option {
	return func(o *options) { o.purgeBatchSize = max(n, 1) }
}

// retention is the background purge's retention; 0: off.
func (o options) retention() time.Duration {
	if o.forgottenRetentionSet {
		return o.forgottenRetention
	}
	return DefaultForgottenRetention
}

func (o options) batchSize() int32 {
	if o.purgeBatchSize > 0 {
		return int32(min(o.purgeBatchSize, 1<<30))
	}
	return DefaultPurgeBatchSize
}
