package remotestorage

// instrument.go: logs and metrics for any manager, as a decorator, so that
// the managers themselves stay free of both. Tracing is the pool's: see
// README, "Observability".

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// The operation label values: the names of the Manager methods.
const (
	opAdd                  = "AddRemoteLogSegmentMetadata"
	opUpdate               = "UpdateRemoteLogSegmentMetadata"
	opLookup               = "RemoteLogSegmentMetadata"
	opHighestOffset        = "HighestOffsetForEpoch"
	opList                 = "ListRemoteLogSegments"
	opListByEpoch          = "ListRemoteLogSegmentsByEpoch"
	opPartitionDelete      = "PutRemotePartitionDeleteMetadata"
	opCaughtUp             = "CaughtUp"
	opRemoteLogSize        = "RemoteLogSize"
	opNextWithTxnIndex     = "NextSegmentWithTxnIndex"
	opFirstForTimestamp    = "FirstSegmentForTimestamp"
	opEpochEndOffset       = "EpochEndOffset"
	opLeadershipChanges    = "OnPartitionLeadershipChanges"
	opStopPartitions       = "OnStopPartitions"
	errLabelInvalidAdd     = "invalid_add"
	errLabelNotFound       = "segment_not_found"
	errLabelSegmentTrans   = "invalid_segment_transition"
	errLabelPartitionTrans = "invalid_partition_delete_transition"
	errLabelNotReady       = "not_ready"
	errLabelIO             = "io"
	errLabelOther          = "other"
)

var instrumentedOps = []string{
	opAdd, opUpdate, opLookup, opHighestOffset, opList, opListByEpoch, opPartitionDelete,
	opCaughtUp, opRemoteLogSize, opNextWithTxnIndex, opLeadershipChanges, opStopPartitions,
	opFirstForTimestamp, opEpochEndOffset,
}

// errorLabels maps each sentinel to its label value, in the order they are
// tried.
var errorLabels = []struct {
	sentinel error
	label    string
}{
	{ErrInvalidAdd, errLabelInvalidAdd},
	{ErrSegmentNotFound, errLabelNotFound},
	{ErrInvalidSegmentTransition, errLabelSegmentTrans},
	{ErrInvalidPartitionDeleteTransition, errLabelPartitionTrans},
	{ErrNotReady, errLabelNotReady},
	{ErrIO, errLabelIO},
}

// errorLabel names the sentinel err wraps; "other" for none.
func errorLabel(err error) string {
	for _, e := range errorLabels {
		if errors.Is(err, e.sentinel) {
			return e.label
		}
	}
	return errLabelOther
}

// durationBuckets spans 250 µs (a cached or in-memory answer) to 8 s (a
// call stuck behind a lock or a reconnect).
var durationBuckets = prometheus.ExponentialBuckets(0.00025, 2, 16)

// InstrumentedManager wraps a Manager with structured logs and Prometheus
// metrics. It is a Manager itself, safe for concurrent use, and a
// prometheus.Collector of:
//
//	rlmm_operation_duration_seconds{operation}       histogram, every call
//	rlmm_operation_errors_total{operation,error}     failed calls, by sentinel: invalid_add,
//	                                                 segment_not_found, invalid_segment_transition,
//	                                                 invalid_partition_delete_transition, not_ready,
//	                                                 io, other
//	rlmm_pool_*{pool}                                with WithPoolStats: see poolStatsCollector
//
// operation is the method name, e.g. "RemoteLogSegmentMetadata".
type InstrumentedManager struct {
	m        Manager
	logger   *slog.Logger
	duration *prometheus.HistogramVec
	errors   *prometheus.CounterVec
	pools    *poolStatsCollector // nil without WithPoolStats
}

var (
	_ Manager              = (*InstrumentedManager)(nil)
	_ prometheus.Collector = (*InstrumentedManager)(nil)
)

// Instrument wraps m. With WithRegisterer it registers the metrics, and
// panics when that fails (as prometheus.MustRegister does: a second
// InstrumentedManager on the same registerer needs other WithConstLabels).
func Instrument(m Manager, opts ...InstrumentOption) *InstrumentedManager {
	var c instrumentConfig
	for _, o := range opts {
		o.applyInstrument(&c)
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	im := &InstrumentedManager{
		m:      m,
		logger: c.logger,
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace:   "rlmm",
			Name:        "operation_duration_seconds",
			Help:        "Duration of remote log metadata operations, successful or not.",
			ConstLabels: c.constLabels,
			Buckets:     durationBuckets,
		}, []string{"operation"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace:   "rlmm",
			Name:        "operation_errors_total",
			Help:        "Failed remote log metadata operations, by the sentinel error they wrap.",
			ConstLabels: c.constLabels,
		}, []string{"operation", "error"}),
	}
	// Every series exists from the start, at zero, so that rate() and
	// alerts see the first error.
	for _, op := range instrumentedOps {
		im.duration.WithLabelValues(op)
		for _, e := range errorLabels {
			im.errors.WithLabelValues(op, e.label)
		}
		im.errors.WithLabelValues(op, errLabelOther)
	}
	if len(c.pools) > 0 {
		im.pools = newPoolStatsCollector(c.pools, c.constLabels)
	}
	if c.registerer != nil {
		if err := c.registerer.Register(im); err != nil {
			panic("remotestorage: Instrument: register the metrics: " + err.Error())
		}
	}
	return im
}

// Unwrap returns the wrapped manager.
func (im *InstrumentedManager) Unwrap() Manager { return im.m }

// Describe implements prometheus.Collector.
func (im *InstrumentedManager) Describe(ch chan<- *prometheus.Desc) {
	im.duration.Describe(ch)
	im.errors.Describe(ch)
	if im.pools != nil {
		im.pools.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (im *InstrumentedManager) Collect(ch chan<- prometheus.Metric) {
	im.duration.Collect(ch)
	im.errors.Collect(ch)
	if im.pools != nil {
		im.pools.Collect(ch)
	}
}

// Close closes the wrapped manager, when it has a Close method.
func (im *InstrumentedManager) Close() {
	if c, ok := im.m.(interface{ Close() }); ok {
		c.Close()
	}
}

// observe records one call: its duration, and when it failed, the error's
// sentinel and a log record.
func (im *InstrumentedManager) observe(ctx context.Context, op string, start time.Time, err error, attrs ...slog.Attr) {
	elapsed := time.Since(start)
	im.duration.WithLabelValues(op).Observe(elapsed.Seconds())
	if err == nil {
		return
	}
	label := errorLabel(err)
	im.errors.WithLabelValues(op, label).Inc()
	level, msg := slog.LevelWarn, "remotestorage: store failure"
	switch label {
	case errLabelInvalidAdd, errLabelNotFound, errLabelSegmentTrans, errLabelPartitionTrans:
		level, msg = slog.LevelDebug, "remotestorage: write refused"
	case errLabelNotReady:
		level, msg = slog.LevelDebug, "remotestorage: partition not ready"
	}
	if !im.logger.Enabled(ctx, level) {
		return
	}
	attrs = append(attrs,
		slog.String("error_kind", label),
		slog.String("error", err.Error()),
		slog.Duration("duration", elapsed))
	im.logger.LogAttrs(ctx, level, msg, append([]slog.Attr{slog.String("op", op)}, attrs...)...)
}

func partitionAttrs(tp TopicIDPartition) []slog.Attr {
	return []slog.Attr{
		slog.String("topic", tp.Topic),
		slog.Int("partition", int(tp.Partition)),
		slog.String("topic_id", tp.TopicID.String()),
	}
}

func segmentAttrs(id RemoteLogSegmentID) []slog.Attr {
	return append(partitionAttrs(id.TopicIDPartition), slog.String("segment_id", id.ID.String()))
}

// AddRemoteLogSegmentMetadata implements RemoteLogMetadataManager.
func (im *InstrumentedManager) AddRemoteLogSegmentMetadata(ctx context.Context, s RemoteLogSegmentMetadata) error {
	start := time.Now()
	err := im.m.AddRemoteLogSegmentMetadata(ctx, s)
	if err != nil {
		im.observe(ctx, opAdd, start, err, append(segmentAttrs(s.SegmentID), slog.String("state", s.State.String()))...)
	} else {
		im.observe(ctx, opAdd, start, nil)
	}
	return err
}

// UpdateRemoteLogSegmentMetadata implements RemoteLogMetadataManager.
func (im *InstrumentedManager) UpdateRemoteLogSegmentMetadata(ctx context.Context, u RemoteLogSegmentMetadataUpdate) error {
	start := time.Now()
	err := im.m.UpdateRemoteLogSegmentMetadata(ctx, u)
	if err != nil {
		im.observe(ctx, opUpdate, start, err, append(segmentAttrs(u.SegmentID), slog.String("state", u.State.String()))...)
	} else {
		im.observe(ctx, opUpdate, start, nil)
	}
	return err
}

// RemoteLogSegmentMetadata implements RemoteLogMetadataManager.
func (im *InstrumentedManager) RemoteLogSegmentMetadata(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch, offset int64) (RemoteLogSegmentMetadata, bool, error) {
	start := time.Now()
	s, found, err := im.m.RemoteLogSegmentMetadata(ctx, tp, epoch, offset)
	if err != nil {
		im.observe(ctx, opLookup, start, err, append(partitionAttrs(tp), slog.Int("epoch", int(epoch)), slog.Int64("offset", offset))...)
	} else {
		im.observe(ctx, opLookup, start, nil)
	}
	return s, found, err
}

// HighestOffsetForEpoch implements RemoteLogMetadataManager.
func (im *InstrumentedManager) HighestOffsetForEpoch(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch) (int64, bool, error) {
	start := time.Now()
	offset, found, err := im.m.HighestOffsetForEpoch(ctx, tp, epoch)
	if err != nil {
		im.observe(ctx, opHighestOffset, start, err, append(partitionAttrs(tp), slog.Int("epoch", int(epoch)))...)
	} else {
		im.observe(ctx, opHighestOffset, start, nil)
	}
	return offset, found, err
}

// ListRemoteLogSegments implements RemoteLogMetadataManager.
func (im *InstrumentedManager) ListRemoteLogSegments(ctx context.Context, tp TopicIDPartition) ([]RemoteLogSegmentMetadata, error) {
	start := time.Now()
	segs, err := im.m.ListRemoteLogSegments(ctx, tp)
	if err != nil {
		im.observe(ctx, opList, start, err, partitionAttrs(tp)...)
	} else {
		im.observe(ctx, opList, start, nil)
	}
	return segs, err
}

// ListRemoteLogSegmentsByEpoch implements RemoteLogMetadataManager.
func (im *InstrumentedManager) ListRemoteLogSegmentsByEpoch(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch) ([]RemoteLogSegmentMetadata, error) {
	start := time.Now()
	segs, err := im.m.ListRemoteLogSegmentsByEpoch(ctx, tp, epoch)
	if err != nil {
		im.observe(ctx, opListByEpoch, start, err, append(partitionAttrs(tp), slog.Int("epoch", int(epoch)))...)
	} else {
		im.observe(ctx, opListByEpoch, start, nil)
	}
	return segs, err
}

// PutRemotePartitionDeleteMetadata implements RemoteLogMetadataManager.
func (im *InstrumentedManager) PutRemotePartitionDeleteMetadata(ctx context.Context, d RemotePartitionDeleteMetadata) error {
	start := time.Now()
	err := im.m.PutRemotePartitionDeleteMetadata(ctx, d)
	if err != nil {
		im.observe(ctx, opPartitionDelete, start, err, append(partitionAttrs(d.TopicIDPartition), slog.String("state", d.State.String()))...)
	} else {
		im.observe(ctx, opPartitionDelete, start, nil)
	}
	return err
}

// CaughtUp implements RemoteLogMetadataManager.
func (im *InstrumentedManager) CaughtUp(ctx context.Context, tp TopicIDPartition) (bool, error) {
	start := time.Now()
	ok, err := im.m.CaughtUp(ctx, tp)
	if err != nil {
		im.observe(ctx, opCaughtUp, start, err, partitionAttrs(tp)...)
	} else {
		im.observe(ctx, opCaughtUp, start, nil)
	}
	return ok, err
}

// RemoteLogSize implements KafkaExtensions.
func (im *InstrumentedManager) RemoteLogSize(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch) (int64, error) {
	start := time.Now()
	size, err := im.m.RemoteLogSize(ctx, tp, epoch)
	if err != nil {
		im.observe(ctx, opRemoteLogSize, start, err, append(partitionAttrs(tp), slog.Int("epoch", int(epoch)))...)
	} else {
		im.observe(ctx, opRemoteLogSize, start, nil)
	}
	return size, err
}

// NextSegmentWithTxnIndex implements KafkaExtensions.
func (im *InstrumentedManager) NextSegmentWithTxnIndex(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch, offset int64) (RemoteLogSegmentMetadata, bool, error) {
	start := time.Now()
	s, found, err := im.m.NextSegmentWithTxnIndex(ctx, tp, epoch, offset)
	if err != nil {
		im.observe(ctx, opNextWithTxnIndex, start, err, append(partitionAttrs(tp), slog.Int("epoch", int(epoch)), slog.Int64("offset", offset))...)
	} else {
		im.observe(ctx, opNextWithTxnIndex, start, nil)
	}
	return s, found, err
}

// FirstSegmentForTimestamp implements KafkaExtensions.
func (im *InstrumentedManager) FirstSegmentForTimestamp(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch, timestampMs, startingOffset int64) (RemoteLogSegmentMetadata, bool, error) {
	start := time.Now()
	s, found, err := im.m.FirstSegmentForTimestamp(ctx, tp, epoch, timestampMs, startingOffset)
	if err != nil {
		im.observe(ctx, opFirstForTimestamp, start, err, append(partitionAttrs(tp), slog.Int("epoch", int(epoch)), slog.Int64("timestamp_ms", timestampMs), slog.Int64("starting_offset", startingOffset))...)
	} else {
		im.observe(ctx, opFirstForTimestamp, start, nil)
	}
	return s, found, err
}

// EpochEndOffset implements KafkaExtensions.
func (im *InstrumentedManager) EpochEndOffset(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch) (int64, bool, error) {
	start := time.Now()
	end, found, err := im.m.EpochEndOffset(ctx, tp, epoch)
	if err != nil {
		im.observe(ctx, opEpochEndOffset, start, err, append(partitionAttrs(tp), slog.Int("epoch", int(epoch)))...)
	} else {
		im.observe(ctx, opEpochEndOffset, start, nil)
	}
	return end, found, err
}

// assignmentHooks are Kafka's partition assignment hooks (PgManager has
// them).
type assignmentHooks interface {
	OnPartitionLeadershipChanges(ctx context.Context, leaders, followers []TopicIDPartition) error
	OnStopPartitions(ctx context.Context, partitions []TopicIDPartition) error
}

// OnPartitionLeadershipChanges passes Kafka's assignment hook on to the
// wrapped manager when it has one; otherwise there is nothing to do.
func (im *InstrumentedManager) OnPartitionLeadershipChanges(ctx context.Context, leaders, followers []TopicIDPartition) error {
	h, ok := im.m.(assignmentHooks)
	if !ok {
		return nil
	}
	start := time.Now()
	err := h.OnPartitionLeadershipChanges(ctx, leaders, followers)
	im.observe(ctx, opLeadershipChanges, start, err, slog.Int("leaders", len(leaders)), slog.Int("followers", len(followers)))
	return err
}

// OnStopPartitions passes Kafka's assignment hook on to the wrapped
// manager when it has one; otherwise there is nothing to do.
func (im *InstrumentedManager) OnStopPartitions(ctx context.Context, partitions []TopicIDPartition) error {
	h, ok := im.m.(assignmentHooks)
	if !ok {
		return nil
	}
	start := time.Now()
	err := h.OnStopPartitions(ctx, partitions)
	im.observe(ctx, opStopPartitions, start, err, slog.Int("partitions", len(partitions)))
	return err
}

// poolStatsCollector reads pgxpool.Stat of each pool when collected.
type poolStatsCollector struct {
	pools []namedPool
	descs []poolStatDesc
}

// poolStatDesc is one exported statistic.
type poolStatDesc struct {
	desc      *prometheus.Desc
	valueType prometheus.ValueType
	value     func(*pgxpool.Stat) float64
}

func newPoolStatsCollector(pools []namedPool, constLabels prometheus.Labels) *poolStatsCollector {
	stat := func(name, help string, t prometheus.ValueType, value func(*pgxpool.Stat) float64) poolStatDesc {
		return poolStatDesc{
			desc:      prometheus.NewDesc("rlmm_pool_"+name, help, []string{"pool"}, constLabels),
			valueType: t,
			value:     value,
		}
	}
	g, c := prometheus.GaugeValue, prometheus.CounterValue
	return &poolStatsCollector{pools: pools, descs: []poolStatDesc{
		stat("acquired_connections", "Connections in use.", g, func(s *pgxpool.Stat) float64 { return float64(s.AcquiredConns()) }),
		stat("idle_connections", "Connections idle in the pool.", g, func(s *pgxpool.Stat) float64 { return float64(s.IdleConns()) }),
		stat("constructing_connections", "Connections being opened.", g, func(s *pgxpool.Stat) float64 { return float64(s.ConstructingConns()) }),
		stat("total_connections", "Connections open or opening.", g, func(s *pgxpool.Stat) float64 { return float64(s.TotalConns()) }),
		stat("max_connections", "The pool's connection limit.", g, func(s *pgxpool.Stat) float64 { return float64(s.MaxConns()) }),
		stat("acquires_total", "Successful acquires of a connection.", c, func(s *pgxpool.Stat) float64 { return float64(s.AcquireCount()) }),
		stat("acquire_seconds_total", "Time spent in successful acquires.", c, func(s *pgxpool.Stat) float64 { return s.AcquireDuration().Seconds() }),
		stat("empty_acquires_total", "Successful acquires that found no idle connection and waited.", c, func(s *pgxpool.Stat) float64 { return float64(s.EmptyAcquireCount()) }),
		stat("empty_acquire_wait_seconds_total", "Time spent waiting by acquires that found no idle connection.", c, func(s *pgxpool.Stat) float64 { return s.EmptyAcquireWaitTime().Seconds() }),
		stat("canceled_acquires_total", "Acquires canceled by their context.", c, func(s *pgxpool.Stat) float64 { return float64(s.CanceledAcquireCount()) }),
		stat("new_connections_total", "Connections opened.", c, func(s *pgxpool.Stat) float64 { return float64(s.NewConnsCount()) }),
		stat("max_lifetime_destroys_total", "Connections closed for reaching MaxConnLifetime.", c, func(s *pgxpool.Stat) float64 { return float64(s.MaxLifetimeDestroyCount()) }),
		stat("max_idle_destroys_total", "Connections closed for reaching MaxConnIdleTime.", c, func(s *pgxpool.Stat) float64 { return float64(s.MaxIdleDestroyCount()) }),
	}}
}

func (p *poolStatsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range p.descs {
		ch <- d.desc
	}
}

func (p *poolStatsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, np := range p.pools {
		s := np.pool.Stat()
		for _, d := range p.descs {
			ch <- prometheus.MustNewConstMetric(d.desc, d.valueType, d.value(s), np.name)
		}
	}
}
