package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/logtest"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/metrics"
	"github.com/krabka/remotestorage/rlmmtest"
)

// metricValue returns the value of the counter or gauge name with labels,
// or the sample count of the histogram; it fails when there is none.
func metricValue(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := g.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue metrics
				}
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	require.FailNow(t, "no such metric", "%s%v", name, labels)
	return 0
}

func TestInstrumentCountsRefusedWrites(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	reg := prometheus.NewPedanticRegistry()
	logger, logs := logtest.New(slog.LevelDebug)
	im := metrics.Instrument(rs.NewInMemoryManager(), metrics.WithRegisterer(reg), metrics.WithLogger(logger))

	tp := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "orders", Partition: 3}
	seg := rs.RemoteLogSegmentMetadata{
		SegmentID: rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.New()},
		EndOffset: 99, State: rs.CopySegmentStarted, SegmentLeaderEpochs: map[rs.LeaderEpoch]int64{0: 0},
	}
	require.NoError(t, im.AddRemoteLogSegmentMetadata(ctx, seg))
	require.ErrorIs(t, im.AddRemoteLogSegmentMetadata(ctx, seg), rs.ErrInvalidAdd)
	unknown := rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.New()}
	require.ErrorIs(t, im.UpdateRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadataUpdate{SegmentID: unknown, State: rs.CopySegmentFinished}), rs.ErrSegmentNotFound)
	require.ErrorIs(t, im.UpdateRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadataUpdate{SegmentID: seg.SegmentID, State: rs.DeleteSegmentFinished}), rs.ErrInvalidSegmentTransition)
	require.ErrorIs(t, im.PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{TopicIDPartition: tp, State: rs.DeletePartitionFinished}), rs.ErrInvalidPartitionDeleteTransition)
	for range 3 {
		_, _, err := im.RemoteLogSegmentMetadata(ctx, tp, 0, 50)
		require.NoError(t, err)
	}

	count := func(op string) float64 {
		return metricValue(t, reg, "rlmm_operation_duration_seconds", map[string]string{"operation": op})
	}
	errs := func(op, kind string) float64 {
		return metricValue(t, reg, "rlmm_operation_errors_total", map[string]string{"operation": op, "error": kind})
	}
	require.EqualValues(t, 2, count("AddRemoteLogSegmentMetadata"))
	require.EqualValues(t, 2, count("UpdateRemoteLogSegmentMetadata"))
	require.EqualValues(t, 3, count("RemoteLogSegmentMetadata"))
	require.EqualValues(t, 0, count("CaughtUp"), "every series exists from the start")
	require.EqualValues(t, 1, errs("AddRemoteLogSegmentMetadata", "invalid_add"))
	require.EqualValues(t, 1, errs("UpdateRemoteLogSegmentMetadata", "segment_not_found"))
	require.EqualValues(t, 1, errs("UpdateRemoteLogSegmentMetadata", "invalid_segment_transition"))
	require.EqualValues(t, 1, errs("PutRemotePartitionDeleteMetadata", "invalid_partition_delete_transition"))
	require.EqualValues(t, 0, errs("RemoteLogSegmentMetadata", "io"))
	require.EqualValues(t, 0, errs("AddRemoteLogSegmentMetadata", "io"))

	// One debug record per refused write, with what to look for.
	records := logs.Records(t)
	require.Len(t, records, 4)
	for _, r := range records {
		require.Equal(t, "DEBUG", r["level"])
		require.Equal(t, "remotestorage: write refused", r["msg"])
		require.Equal(t, "orders", r["topic"])
		require.EqualValues(t, 3, r["partition"])
		require.Equal(t, tp.TopicID.String(), r["topic_id"])
	}
	require.Equal(t, "AddRemoteLogSegmentMetadata", records[0]["op"])
	require.Equal(t, seg.SegmentID.ID.String(), records[0]["segment_id"])
	require.Equal(t, "invalid_add", records[0]["error_kind"])
	require.Equal(t, unknown.ID.String(), records[1]["segment_id"])
	require.Equal(t, "DELETE_SEGMENT_FINISHED", records[2]["state"])
	require.Contains(t, records[2]["error"], "COPY_SEGMENT_STARTED")

	// At Info, refused writes are not logged.
	quiet, quietLogs := logtest.New(slog.LevelInfo)
	im2 := metrics.Instrument(rs.NewInMemoryManager(), metrics.WithLogger(quiet))
	require.Error(t, im2.UpdateRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadataUpdate{SegmentID: unknown, State: rs.CopySegmentFinished}))
	require.Empty(t, quietLogs.String())
	// Every operation (17) times every kind of error (7) is a series.
	require.Equal(t, 17*7, testutil.CollectAndCount(im2, "rlmm_operation_errors_total"))
	require.Equal(t, 17, testutil.CollectAndCount(im2, "rlmm_operation_duration_seconds"))
	problems, err := testutil.CollectAndLint(im2)
	require.NoError(t, err)
	require.Empty(t, problems)
}

// stubManager fails every call with err.
type stubManager struct{ err error }

func (s stubManager) AddRemoteLogSegmentMetadata(context.Context, rs.RemoteLogSegmentMetadata) error {
	return s.err
}
func (s stubManager) UpdateRemoteLogSegmentMetadata(context.Context, rs.RemoteLogSegmentMetadataUpdate) error {
	return s.err
}
func (s stubManager) RemoteLogSegmentMetadata(context.Context, rs.TopicIDPartition, rs.LeaderEpoch, int64) (rs.RemoteLogSegmentMetadata, bool, error) {
	return rs.RemoteLogSegmentMetadata{}, false, s.err
}
func (s stubManager) HighestOffsetForEpoch(context.Context, rs.TopicIDPartition, rs.LeaderEpoch) (int64, bool, error) {
	return 0, false, s.err
}
func (s stubManager) ListRemoteLogSegments(context.Context, rs.TopicIDPartition) ([]rs.RemoteLogSegmentMetadata, error) {
	return nil, s.err
}
func (s stubManager) ListRemoteLogSegmentsByEpoch(context.Context, rs.TopicIDPartition, rs.LeaderEpoch) ([]rs.RemoteLogSegmentMetadata, error) {
	return nil, s.err
}
func (s stubManager) PutRemotePartitionDeleteMetadata(context.Context, rs.RemotePartitionDeleteMetadata) error {
	return s.err
}
func (s stubManager) CaughtUp(context.Context, rs.TopicIDPartition) (bool, error) {
	return false, s.err
}
func (s stubManager) RemoteLogSize(context.Context, rs.TopicIDPartition, rs.LeaderEpoch) (int64, error) {
	return 0, s.err
}
func (s stubManager) NextSegmentWithTxnIndex(context.Context, rs.TopicIDPartition, rs.LeaderEpoch, int64) (rs.RemoteLogSegmentMetadata, bool, error) {
	return rs.RemoteLogSegmentMetadata{}, false, s.err
}
func (s stubManager) FirstSegmentForTimestamp(context.Context, rs.TopicIDPartition, rs.LeaderEpoch, int64, int64) (rs.RemoteLogSegmentMetadata, bool, error) {
	return rs.RemoteLogSegmentMetadata{}, false, s.err
}
func (s stubManager) EpochEndOffset(context.Context, rs.TopicIDPartition, rs.LeaderEpoch) (int64, bool, error) {
	return 0, false, s.err
}

// TestInstrumentErrorLabels: every method, every kind of error.
func TestInstrumentErrorLabels(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	tp := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "orders", Partition: 0}
	id := rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.New()}
	calls := map[string]func(m rs.Manager) error{
		"AddRemoteLogSegmentMetadata": func(m rs.Manager) error {
			return m.AddRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadata{SegmentID: id})
		},
		"UpdateRemoteLogSegmentMetadata": func(m rs.Manager) error {
			return m.UpdateRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadataUpdate{SegmentID: id})
		},
		"RemoteLogSegmentMetadata": func(m rs.Manager) error {
			_, _, err := m.RemoteLogSegmentMetadata(ctx, tp, 0, 0)
			return err
		},
		"HighestOffsetForEpoch": func(m rs.Manager) error {
			_, _, err := m.HighestOffsetForEpoch(ctx, tp, 0)
			return err
		},
		"ListRemoteLogSegments": func(m rs.Manager) error {
			_, err := m.ListRemoteLogSegments(ctx, tp)
			return err
		},
		"ListRemoteLogSegmentsByEpoch": func(m rs.Manager) error {
			_, err := m.ListRemoteLogSegmentsByEpoch(ctx, tp, 0)
			return err
		},
		"PutRemotePartitionDeleteMetadata": func(m rs.Manager) error {
			return m.PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{TopicIDPartition: tp})
		},
		"CaughtUp": func(m rs.Manager) error {
			_, err := m.CaughtUp(ctx, tp)
			return err
		},
		"RemoteLogSize": func(m rs.Manager) error {
			_, err := m.RemoteLogSize(ctx, tp, 0)
			return err
		},
		"NextSegmentWithTxnIndex": func(m rs.Manager) error {
			_, _, err := m.NextSegmentWithTxnIndex(ctx, tp, 0, 0)
			return err
		},
		"FirstSegmentForTimestamp": func(m rs.Manager) error {
			_, _, err := m.FirstSegmentForTimestamp(ctx, tp, 0, 0, 0)
			return err
		},
		"EpochEndOffset": func(m rs.Manager) error {
			_, _, err := m.EpochEndOffset(ctx, tp, 0)
			return err
		},
		// stubManager has no streams: the wrapper streams its slice lists.
		"RemoteLogSegments": func(m rs.Manager) error {
			return firstError(m.(rs.SegmentStreams).RemoteLogSegments(ctx, tp))
		},
		"RemoteLogSegmentsByEpoch": func(m rs.Manager) error {
			return firstError(m.(rs.SegmentStreams).RemoteLogSegmentsByEpoch(ctx, tp, 0))
		},
	}
	kinds := map[string]error{
		"invalid_add":                         fmt.Errorf("%w: detail", rs.ErrInvalidAdd),
		"segment_not_found":                   fmt.Errorf("%w: detail", rs.ErrSegmentNotFound),
		"invalid_segment_transition":          fmt.Errorf("%w: detail", rs.ErrInvalidSegmentTransition),
		"invalid_partition_delete_transition": fmt.Errorf("%w: detail", rs.ErrInvalidPartitionDeleteTransition),
		"not_ready":                           fmt.Errorf("%w: detail", rs.ErrNotReady),
		"io":                                  errors.Join(rs.ErrIO, context.DeadlineExceeded),
		"other":                               errors.New("something else"),
	}
	for kind, err := range kinds {
		logger, logs := logtest.New(slog.LevelDebug)
		reg := prometheus.NewPedanticRegistry()
		im := metrics.Instrument(stubManager{err: err}, metrics.WithLogger(logger), metrics.WithRegisterer(reg))
		for op, call := range calls {
			require.ErrorIs(t, call(im), err, "the error comes back unchanged")
			for otherKind := range kinds {
				want := 0.0
				if otherKind == kind {
					want = 1
				}
				require.Equal(t, want, metricValue(t, reg, "rlmm_operation_errors_total",
					map[string]string{"operation": op, "error": otherKind}), "%s %s", op, otherKind)
			}
		}
		wantLevel := "WARN"
		if kind != "io" && kind != "other" {
			wantLevel = "DEBUG"
		}
		records := logs.Records(t)
		require.Len(t, records, len(calls))
		for _, r := range records {
			require.Equal(t, wantLevel, r["level"], kind)
			require.Equal(t, kind, r["error_kind"])
		}
	}
}

// firstError walks seq and returns the first error it yields.
func firstError(seq iter.Seq2[rs.RemoteLogSegmentMetadata, error]) error {
	for _, err := range seq {
		if err != nil {
			return err
		}
	}
	return nil
}

// streamCounter is an InMemoryManager that counts the streams it starts.
type streamCounter struct {
	*rs.InMemoryManager
	streams atomic.Int64
}

func (c *streamCounter) RemoteLogSegments(ctx context.Context, tp rs.TopicIDPartition) iter.Seq2[rs.RemoteLogSegmentMetadata, error] {
	c.streams.Add(1)
	return c.InMemoryManager.RemoteLogSegments(ctx, tp)
}

func (c *streamCounter) RemoteLogSegmentsByEpoch(ctx context.Context, tp rs.TopicIDPartition, e rs.LeaderEpoch) iter.Seq2[rs.RemoteLogSegmentMetadata, error] {
	c.streams.Add(1)
	return c.InMemoryManager.RemoteLogSegmentsByEpoch(ctx, tp, e)
}

// Instrument keeps the wrapped manager's streaming lists: the wrapper is
// SegmentStreams, its streams are the wrapped manager's, yield what the
// slice lists return, and each walk, finished or stopped early, is one
// observed call.
func TestInstrumentForwardsSegmentStreams(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	inner := &streamCounter{InMemoryManager: rs.NewInMemoryManager()}
	reg := prometheus.NewPedanticRegistry()
	im := metrics.Instrument(inner, metrics.WithRegisterer(reg))
	var streams rs.SegmentStreams = im

	tp := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "orders", Partition: 0}
	for i := range 5 {
		s := rs.RemoteLogSegmentMetadata{
			SegmentID:   rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.New()},
			StartOffset: int64(i * 10), EndOffset: int64(i*10 + 9), State: rs.CopySegmentStarted,
			SegmentLeaderEpochs: map[rs.LeaderEpoch]int64{rs.LeaderEpoch(i % 2): int64(i * 10)},
		}
		require.NoError(t, im.AddRemoteLogSegmentMetadata(ctx, s))
	}
	collect := func(seq iter.Seq2[rs.RemoteLogSegmentMetadata, error]) []rs.RemoteLogSegmentMetadata {
		var out []rs.RemoteLogSegmentMetadata
		for s, err := range seq {
			require.NoError(t, err)
			out = append(out, s)
		}
		return out
	}
	want, err := im.ListRemoteLogSegments(ctx, tp)
	require.NoError(t, err)
	require.Equal(t, want, collect(streams.RemoteLogSegments(ctx, tp)))
	wantEpoch, err := im.ListRemoteLogSegmentsByEpoch(ctx, tp, 1)
	require.NoError(t, err)
	require.Len(t, wantEpoch, 2)
	require.Equal(t, wantEpoch, collect(streams.RemoteLogSegmentsByEpoch(ctx, tp, 1)))
	for _, err := range streams.RemoteLogSegments(ctx, tp) {
		require.NoError(t, err)
		break
	}
	require.EqualValues(t, 3, inner.streams.Load(), "the wrapped manager's streams")
	require.EqualValues(t, 2, metricValue(t, reg, "rlmm_operation_duration_seconds", map[string]string{"operation": "RemoteLogSegments"}))
	require.EqualValues(t, 1, metricValue(t, reg, "rlmm_operation_duration_seconds", map[string]string{"operation": "RemoteLogSegmentsByEpoch"}))
	require.Zero(t, metricValue(t, reg, "rlmm_operation_errors_total", map[string]string{"operation": "RemoteLogSegments", "error": "other"}))
}

// TestInstrumentStoreFailureLogsNoPassword makes a real PgManager lose its
// database (the pool's next connection goes to a closed port) and checks the
// warning: operation, partition and segment, and not the password.
func TestInstrumentStoreFailureLogsNoPassword(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u, err := url.Parse(pgtest.NewDatabase(t))
	require.NoError(t, err)
	password, ok := u.User.Password()
	if !ok {
		password = "s3cr3t-Pa55w0rd" // the local test server trusts its connections: any password does
		u.User = url.UserPassword(u.User.Username(), password)
	}
	cfg, err := pgxpool.ParseConfig(u.String())
	require.NoError(t, err)
	require.Equal(t, password, cfg.ConnConfig.Password)
	var broken atomic.Bool
	cfg.BeforeConnect = func(_ context.Context, cc *pgx.ConnConfig) error {
		if broken.Load() {
			cc.Host, cc.Port, cc.Fallbacks = "127.0.0.1", 1, nil // nothing listens there
		}
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()
	m, err := rs.NewPgManager(ctx, pool)
	require.NoError(t, err)
	defer m.Close()

	reg := prometheus.NewPedanticRegistry()
	logger, logs := logtest.New(slog.LevelDebug)
	im := metrics.Instrument(m, metrics.WithLogger(logger), metrics.WithRegisterer(reg), metrics.WithPoolStats("primary", pool))
	tp := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "orders", Partition: 1}
	id := rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.New()}
	_, _, err = im.RemoteLogSegmentMetadata(ctx, tp, 0, 0)
	require.NoError(t, err)
	require.EqualValues(t, cfg.MaxConns, metricValue(t, reg, "rlmm_pool_max_connections", map[string]string{"pool": "primary"}))
	require.Positive(t, metricValue(t, reg, "rlmm_pool_acquires_total", map[string]string{"pool": "primary"}))
	require.Positive(t, metricValue(t, reg, "rlmm_pool_new_connections_total", map[string]string{"pool": "primary"}))

	broken.Store(true)
	pool.Reset() // close every connection: the next call must connect
	err = im.UpdateRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadataUpdate{SegmentID: id, State: rs.CopySegmentFinished})
	require.ErrorIs(t, err, rs.ErrIO)

	require.EqualValues(t, 1, metricValue(t, reg, "rlmm_operation_errors_total",
		map[string]string{"operation": "UpdateRemoteLogSegmentMetadata", "error": "io"}))
	records := logs.Records(t)
	require.Len(t, records, 1)
	r := records[0]
	require.Equal(t, "WARN", r["level"])
	require.Equal(t, "remotestorage: store failure", r["msg"])
	require.Equal(t, "UpdateRemoteLogSegmentMetadata", r["op"])
	require.Equal(t, id.ID.String(), r["segment_id"])
	require.Equal(t, "orders", r["topic"])
	require.Contains(t, r["error"], "127.0.0.1", "the error says what failed")
	require.NotContains(t, logs.String(), password)
	require.NotContains(t, err.Error(), password)
}

// TestInstrumentRegistration: managers of two clusters share a registry
// through their constant labels; the same labels twice are refused.
func TestInstrumentRegistration(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	metrics.Instrument(rs.NewInMemoryManager(), metrics.WithRegisterer(reg), metrics.WithConstLabels(prometheus.Labels{"cluster": "a"}))
	b := metrics.Instrument(rs.NewInMemoryManager(), metrics.WithRegisterer(reg), metrics.WithConstLabels(prometheus.Labels{"cluster": "b"}))
	_, err := b.ListRemoteLogSegments(t.Context(), rs.TopicIDPartition{TopicID: uuid.New(), Topic: "t"})
	require.NoError(t, err)
	require.EqualValues(t, 0, metricValue(t, reg, "rlmm_operation_duration_seconds", map[string]string{"cluster": "a", "operation": "ListRemoteLogSegments"}))
	require.EqualValues(t, 1, metricValue(t, reg, "rlmm_operation_duration_seconds", map[string]string{"cluster": "b", "operation": "ListRemoteLogSegments"}))
	require.PanicsWithValue(t, "remotestorage: Instrument: register the metrics: duplicate metrics collector registration attempted", func() {
		metrics.Instrument(rs.NewInMemoryManager(), metrics.WithRegisterer(reg), metrics.WithConstLabels(prometheus.Labels{"cluster": "a"}))
	})
	require.IsType(t, &rs.InMemoryManager{}, b.Unwrap())
}

// Instrument changes no answer.
func TestInstrumentedManagerConformance(t *testing.T) {
	t.Parallel()
	rlmmtest.Run(t, func(t *testing.T, opts ...rs.Option) rs.Manager {
		return metrics.Instrument(rs.NewInMemoryManager(opts...), metrics.WithRegisterer(prometheus.NewPedanticRegistry()))
	})
}
