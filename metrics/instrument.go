package metrics

// instrument.go: logs and metrics for any manager, as a decorator, so that
// the managers themselves stay free of both. Tracing is the pool's: see
// docs/OPERATIONS.md, "Observability".

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	rs "github.com/krabka/remotestorage"
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
	opStream               = "RemoteLogSegments"
	opStreamByEpoch        = "RemoteLogSegmentsByEpoch"
	opDeleteState          = "PartitionDeleteState"
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
	opFirstForTimestamp, opEpochEndOffset, opStream, opStreamByEpoch, opDeleteState,
}

// errorLabels maps each sentinel to its label value, in the order they are
// tried.
var errorLabels = []struct {
	sentinel error
	label    string
}{
	{rs.ErrInvalidAdd, errLabelInvalidAdd},
	{rs.ErrSegmentNotFound, errLabelNotFound},
	{rs.ErrInvalidSegmentTransition, errLabelSegmentTrans},
	{rs.ErrInvalidPartitionDeleteTransition, errLabelPartitionTrans},
	{rs.ErrNotReady, errLabelNotReady},
	{rs.ErrIO, errLabelIO},
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
// metrics. It is a Manager itself, and SegmentStreams, safe for concurrent
// use, and a prometheus.Collector of:
//
//	rlmm_operation_duration_seconds{operation}       histogram, every call
//	rlmm_operation_errors_total{operation,error}     failed calls, by sentinel: invalid_add,
//	                                                 segment_not_found, invalid_segment_transition,
//	                                                 invalid_partition_delete_transition, not_ready,
//	                                                 io, other
//	rlmm_pool_*{pool}                                with WithPoolStats: see poolStatsCollector
//	rlmm_caught_up_answers_total{answer}             CaughtUp's answers: "true" or "false"
//	rlmm_purged_segments_total                       segments the wrapped manager purged (PurgeForgotten
//	                                                 and its background purge), when it purges
//	rlmm_purge_last_success_timestamp_seconds        when a purge last succeeded (Unix seconds, 0 before
//	                                                 the first), when the wrapped manager says (LastPurge)
//
// operation is the method name, e.g. "RemoteLogSegmentMetadata". A stream's
// duration is the time spent in the stream, not in the caller's loop body.
type InstrumentedManager struct {
	m        rs.Manager
	logger   *slog.Logger
	duration *prometheus.HistogramVec
	errors   *prometheus.CounterVec
	caughtUp *prometheus.CounterVec
	pools    *poolStatsCollector    // nil without WithPoolStats
	purge    []prometheus.Collector // what the wrapped manager says of its purges
}

var (
	_ rs.Manager               = (*InstrumentedManager)(nil)
	_ rs.SegmentStreams        = (*InstrumentedManager)(nil)
	_ rs.PartitionDeleteStates = (*InstrumentedManager)(nil)
	_ prometheus.Collector     = (*InstrumentedManager)(nil)
)

// Instrument wraps m. With WithRegisterer it registers the metrics, and
// panics when that fails (as prometheus.MustRegister does: a second
// InstrumentedManager on the same registerer needs other WithConstLabels).
func Instrument(m rs.Manager, opts ...InstrumentOption) *InstrumentedManager {
	var c instrumentConfig
	for _, o := range opts {
		o(&c)
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
		caughtUp: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace:   "rlmm",
			Name:        "caught_up_answers_total",
			Help:        "CaughtUp's answers (what a broker's isReady asks), by answer: a partition answered false for long has a cache that does not catch up.",
			ConstLabels: c.constLabels,
		}, []string{"answer"}),
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
	im.caughtUp.WithLabelValues("true")
	im.caughtUp.WithLabelValues("false")
	if len(c.pools) > 0 {
		im.pools = newPoolStatsCollector(c.pools, c.constLabels)
	}
	if p, ok := m.(interface{ PurgedSegments() int64 }); ok {
		im.purge = append(im.purge, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace:   "rlmm",
			Name:        "purged_segments_total",
			Help:        "Forgotten segments this manager deleted (purge.go), in the background and through PurgeForgotten.",
			ConstLabels: c.constLabels,
		}, func() float64 { return float64(p.PurgedSegments()) }))
	}
	if p, ok := m.(interface{ LastPurge() time.Time }); ok {
		im.purge = append(im.purge, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace:   "rlmm",
			Name:        "purge_last_success_timestamp_seconds",
			Help:        "When a purge of forgotten segments (background or PurgeForgotten) last succeeded, in Unix seconds; 0 before the first.",
			ConstLabels: c.constLabels,
		}, func() float64 {
			t := p.LastPurge()
			if t.IsZero() {
				return 0
			}
			return float64(t.UnixNano()) / 1e9
		}))
	}
	if c.registerer != nil {
		if err := c.registerer.Register(im); err != nil {
			panic("remotestorage: Instrument: register the metrics: " + err.Error())
		}
	}
	return im
}

// Unwrap returns the wrapped manager.
func (im *InstrumentedManager) Unwrap() rs.Manager { return im.m }

// Describe implements prometheus.Collector.
func (im *InstrumentedManager) Describe(ch chan<- *prometheus.Desc) {
	im.duration.Describe(ch)
	im.errors.Describe(ch)
	im.caughtUp.Describe(ch)
	if im.pools != nil {
		im.pools.Describe(ch)
	}
	for _, c := range im.purge {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (im *InstrumentedManager) Collect(ch chan<- prometheus.Metric) {
	im.duration.Collect(ch)
	im.errors.Collect(ch)
	im.caughtUp.Collect(ch)
	if im.pools != nil {
		im.pools.Collect(ch)
	}
	for _, c := range im.purge {
		c.Collect(ch)
	}
}

// Close closes the wrapped manager, when it has a Close method.
func (im *InstrumentedManager) Close() {
	if c, ok := im.m.(interface{ Close() }); ok {
		c.Close()
	}
}

// record is deferred by every wrapper, as
//
//	defer im.record(ctx, op, time.Now(), &err, attrs)
//
// so that it sees the call's start and, through err, its outcome: it
// observes the duration, and when the call failed, counts the error's
// sentinel and logs it with attrs() (only then evaluated).
func (im *InstrumentedManager) record(ctx context.Context, op string, start time.Time, err *error, attrs func() []slog.Attr) {
	im.observe(ctx, op, time.Since(start), *err, attrs)
}

// observe records one call that took elapsed and returned err.
func (im *InstrumentedManager) observe(ctx context.Context, op string, elapsed time.Duration, err error, attrs func() []slog.Attr) {
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
	all := append([]slog.Attr{slog.String("op", op)}, attrs()...)
	all = append(all,
		slog.String("error_kind", label),
		slog.String("error", err.Error()),
		slog.Duration("duration", elapsed))
	im.logger.LogAttrs(ctx, level, msg, all...)
}

// The log attributes of the calls, by what the call names.

func partitionAttrs(tp rs.TopicIDPartition) []slog.Attr {
	return []slog.Attr{
		slog.String("topic", tp.Topic),
		slog.Int("partition", int(tp.Partition)),
		slog.String("topic_id", tp.TopicID.String()),
	}
}

func attrsOf(tp rs.TopicIDPartition) func() []slog.Attr {
	return func() []slog.Attr { return partitionAttrs(tp) }
}

func epochAttrs(tp rs.TopicIDPartition, epoch rs.LeaderEpoch, more ...slog.Attr) func() []slog.Attr {
	return func() []slog.Attr {
		return append(append(partitionAttrs(tp), slog.Int("epoch", int(epoch))), more...)
	}
}

func writeAttrs(id rs.RemoteLogSegmentID, state rs.RemoteLogSegmentState) func() []slog.Attr {
	return func() []slog.Attr {
		return append(partitionAttrs(id.TopicIDPartition), slog.String("segment_id", id.ID.String()), slog.String("state", state.String()))
	}
}

// AddRemoteLogSegmentMetadata implements RemoteLogMetadataManager.
func (im *InstrumentedManager) AddRemoteLogSegmentMetadata(ctx context.Context, s rs.RemoteLogSegmentMetadata) (err error) {
	defer im.record(ctx, opAdd, time.Now(), &err, writeAttrs(s.SegmentID, s.State))
	return im.m.AddRemoteLogSegmentMetadata(ctx, s)
}

// UpdateRemoteLogSegmentMetadata implements RemoteLogMetadataManager.
func (im *InstrumentedManager) UpdateRemoteLogSegmentMetadata(ctx context.Context, u rs.RemoteLogSegmentMetadataUpdate) (err error) {
	defer im.record(ctx, opUpdate, time.Now(), &err, writeAttrs(u.SegmentID, u.State))
	return im.m.UpdateRemoteLogSegmentMetadata(ctx, u)
}

// RemoteLogSegmentMetadata implements RemoteLogMetadataManager.
func (im *InstrumentedManager) RemoteLogSegmentMetadata(ctx context.Context, tp rs.TopicIDPartition, epoch rs.LeaderEpoch, offset int64) (_ rs.RemoteLogSegmentMetadata, _ bool, err error) {
	defer im.record(ctx, opLookup, time.Now(), &err, epochAttrs(tp, epoch, slog.Int64("offset", offset)))
	return im.m.RemoteLogSegmentMetadata(ctx, tp, epoch, offset)
}

// HighestOffsetForEpoch implements RemoteLogMetadataManager.
func (im *InstrumentedManager) HighestOffsetForEpoch(ctx context.Context, tp rs.TopicIDPartition, epoch rs.LeaderEpoch) (_ int64, _ bool, err error) {
	defer im.record(ctx, opHighestOffset, time.Now(), &err, epochAttrs(tp, epoch))
	return im.m.HighestOffsetForEpoch(ctx, tp, epoch)
}

// ListRemoteLogSegments implements RemoteLogMetadataManager.
func (im *InstrumentedManager) ListRemoteLogSegments(ctx context.Context, tp rs.TopicIDPartition) (_ []rs.RemoteLogSegmentMetadata, err error) {
	defer im.record(ctx, opList, time.Now(), &err, attrsOf(tp))
	return im.m.ListRemoteLogSegments(ctx, tp)
}

// ListRemoteLogSegmentsByEpoch implements RemoteLogMetadataManager.
func (im *InstrumentedManager) ListRemoteLogSegmentsByEpoch(ctx context.Context, tp rs.TopicIDPartition, epoch rs.LeaderEpoch) (_ []rs.RemoteLogSegmentMetadata, err error) {
	defer im.record(ctx, opListByEpoch, time.Now(), &err, epochAttrs(tp, epoch))
	return im.m.ListRemoteLogSegmentsByEpoch(ctx, tp, epoch)
}

// PutRemotePartitionDeleteMetadata implements RemoteLogMetadataManager.
func (im *InstrumentedManager) PutRemotePartitionDeleteMetadata(ctx context.Context, d rs.RemotePartitionDeleteMetadata) (err error) {
	defer im.record(ctx, opPartitionDelete, time.Now(), &err, func() []slog.Attr {
		return append(partitionAttrs(d.TopicIDPartition), slog.String("state", d.State.String()))
	})
	return im.m.PutRemotePartitionDeleteMetadata(ctx, d)
}

// CaughtUp implements RemoteLogMetadataManager.
func (im *InstrumentedManager) CaughtUp(ctx context.Context, tp rs.TopicIDPartition) (_ bool, err error) {
	defer im.record(ctx, opCaughtUp, time.Now(), &err, attrsOf(tp))
	ok, err := im.m.CaughtUp(ctx, tp)
	if err == nil {
		im.caughtUp.WithLabelValues(strconv.FormatBool(ok)).Inc()
	}
	return ok, err
}

// RemoteLogSize implements KafkaExtensions.
func (im *InstrumentedManager) RemoteLogSize(ctx context.Context, tp rs.TopicIDPartition, epoch rs.LeaderEpoch) (_ int64, err error) {
	defer im.record(ctx, opRemoteLogSize, time.Now(), &err, epochAttrs(tp, epoch))
	return im.m.RemoteLogSize(ctx, tp, epoch)
}

// NextSegmentWithTxnIndex implements KafkaExtensions.
func (im *InstrumentedManager) NextSegmentWithTxnIndex(ctx context.Context, tp rs.TopicIDPartition, epoch rs.LeaderEpoch, offset int64) (_ rs.RemoteLogSegmentMetadata, _ bool, err error) {
	defer im.record(ctx, opNextWithTxnIndex, time.Now(), &err, epochAttrs(tp, epoch, slog.Int64("offset", offset)))
	return im.m.NextSegmentWithTxnIndex(ctx, tp, epoch, offset)
}

// FirstSegmentForTimestamp implements KafkaExtensions.
func (im *InstrumentedManager) FirstSegmentForTimestamp(ctx context.Context, tp rs.TopicIDPartition, epoch rs.LeaderEpoch, timestampMs, startingOffset int64) (_ rs.RemoteLogSegmentMetadata, _ bool, err error) {
	defer im.record(ctx, opFirstForTimestamp, time.Now(), &err,
		epochAttrs(tp, epoch, slog.Int64("timestamp_ms", timestampMs), slog.Int64("starting_offset", startingOffset)))
	return im.m.FirstSegmentForTimestamp(ctx, tp, epoch, timestampMs, startingOffset)
}

// EpochEndOffset implements KafkaExtensions.
func (im *InstrumentedManager) EpochEndOffset(ctx context.Context, tp rs.TopicIDPartition, epoch rs.LeaderEpoch) (_ int64, _ bool, err error) {
	defer im.record(ctx, opEpochEndOffset, time.Now(), &err, epochAttrs(tp, epoch))
	return im.m.EpochEndOffset(ctx, tp, epoch)
}

// PartitionDeleteState implements PartitionDeleteStates for a wrapped
// manager that does; any other fails with an error that names its type.
func (im *InstrumentedManager) PartitionDeleteState(ctx context.Context, tp rs.TopicIDPartition) (_ rs.RemotePartitionDeleteState, _ bool, err error) {
	s, ok := im.m.(rs.PartitionDeleteStates)
	if !ok {
		return 0, false, fmt.Errorf("remotestorage: %T does not report partition-delete states", im.m)
	}
	defer im.record(ctx, opDeleteState, time.Now(), &err, attrsOf(tp))
	return s.PartitionDeleteState(ctx, tp)
}

// RemoteLogSegments implements SegmentStreams: the wrapped manager's stream,
// or, when it has none, its ListRemoteLogSegments yielded one by one.
func (im *InstrumentedManager) RemoteLogSegments(ctx context.Context, tp rs.TopicIDPartition) iter.Seq2[rs.RemoteLogSegmentMetadata, error] {
	var seq iter.Seq2[rs.RemoteLogSegmentMetadata, error]
	if s, ok := im.m.(rs.SegmentStreams); ok {
		seq = s.RemoteLogSegments(ctx, tp)
	} else {
		seq = streamOf(func() ([]rs.RemoteLogSegmentMetadata, error) { return im.m.ListRemoteLogSegments(ctx, tp) })
	}
	return im.stream(ctx, opStream, seq, attrsOf(tp))
}

// RemoteLogSegmentsByEpoch implements SegmentStreams, as RemoteLogSegments.
func (im *InstrumentedManager) RemoteLogSegmentsByEpoch(ctx context.Context, tp rs.TopicIDPartition, epoch rs.LeaderEpoch) iter.Seq2[rs.RemoteLogSegmentMetadata, error] {
	var seq iter.Seq2[rs.RemoteLogSegmentMetadata, error]
	if s, ok := im.m.(rs.SegmentStreams); ok {
		seq = s.RemoteLogSegmentsByEpoch(ctx, tp, epoch)
	} else {
		seq = streamOf(func() ([]rs.RemoteLogSegmentMetadata, error) {
			return im.m.ListRemoteLogSegmentsByEpoch(ctx, tp, epoch)
		})
	}
	return im.stream(ctx, opStreamByEpoch, seq, epochAttrs(tp, epoch))
}

// stream records one walk of seq as one call: its duration is the time
// spent in seq, not in the caller's loop body, and its error the one seq
// yielded, if any. A walk the caller stops early is a success.
func (im *InstrumentedManager) stream(ctx context.Context, op string, seq iter.Seq2[rs.RemoteLogSegmentMetadata, error], attrs func() []slog.Attr) iter.Seq2[rs.RemoteLogSegmentMetadata, error] {
	return func(yield func(rs.RemoteLogSegmentMetadata, error) bool) {
		var spent time.Duration
		var failure error
		resumed := time.Now()
		stopped := false
		for s, err := range seq {
			spent += time.Since(resumed)
			if err != nil {
				failure = err
			}
			if !yield(s, err) {
				stopped = true
				break
			}
			resumed = time.Now()
		}
		if !stopped {
			spent += time.Since(resumed)
		}
		im.observe(ctx, op, spent, failure, attrs)
	}
}

// streamOf yields the segments list returns, or its error.
func streamOf(list func() ([]rs.RemoteLogSegmentMetadata, error)) iter.Seq2[rs.RemoteLogSegmentMetadata, error] {
	return func(yield func(rs.RemoteLogSegmentMetadata, error) bool) {
		segments, err := list()
		if err != nil {
			yield(rs.RemoteLogSegmentMetadata{}, err)
			return
		}
		for _, s := range segments {
			if !yield(s, nil) {
				return
			}
		}
	}
}

// assignmentHooks are Kafka's partition assignment hooks (PgManager has
// them).
type assignmentHooks interface {
	OnPartitionLeadershipChanges(ctx context.Context, leaders, followers []rs.TopicIDPartition) error
	OnStopPartitions(ctx context.Context, partitions []rs.TopicIDPartition) error
}

// OnPartitionLeadershipChanges passes Kafka's assignment hook on to the
// wrapped manager when it has one; otherwise there is nothing to do.
func (im *InstrumentedManager) OnPartitionLeadershipChanges(ctx context.Context, leaders, followers []rs.TopicIDPartition) (err error) {
	h, ok := im.m.(assignmentHooks)
	if !ok {
		return nil
	}
	defer im.record(ctx, opLeadershipChanges, time.Now(), &err, func() []slog.Attr {
		return []slog.Attr{slog.Int("leaders", len(leaders)), slog.Int("followers", len(followers))}
	})
	return h.OnPartitionLeadershipChanges(ctx, leaders, followers)
}

// OnStopPartitions passes Kafka's assignment hook on to the wrapped
// manager when it has one; otherwise there is nothing to do.
func (im *InstrumentedManager) OnStopPartitions(ctx context.Context, partitions []rs.TopicIDPartition) (err error) {
	h, ok := im.m.(assignmentHooks)
	if !ok {
		return nil
	}
	defer im.record(ctx, opStopPartitions, time.Now(), &err, func() []slog.Attr {
		return []slog.Attr{slog.Int("partitions", len(partitions))}
	})
	return h.OnStopPartitions(ctx, partitions)
}
