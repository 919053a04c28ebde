package metrics_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/testwait"
	"github.com/krabka/remotestorage/metrics"
)

// Instrument exports the segments a manager purged.
func TestPurgeCountedInMetrics(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	m := rs.NewInMemoryManager()
	im := metrics.Instrument(m)
	tp := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "orders", Partition: 0}
	for i := range int64(3) {
		id := rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.New()}
		require.NoError(t, im.AddRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadata{
			SegmentID: id, StartOffset: i * 100, EndOffset: i*100 + 99, SegmentSizeInBytes: 1024,
			State: rs.CopySegmentStarted, SegmentLeaderEpochs: map[rs.LeaderEpoch]int64{0: i * 100},
		}))
		for _, st := range []rs.RemoteLogSegmentState{rs.DeleteSegmentStarted, rs.DeleteSegmentFinished} {
			require.NoError(t, im.UpdateRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadataUpdate{SegmentID: id, State: st, BrokerID: 1, EventTimestampMs: 1}))
		}
	}
	const want = `
# HELP rlmm_purged_segments_total Forgotten segments this manager deleted (purge.go), in the background and through PurgeForgotten.
# TYPE rlmm_purged_segments_total counter
rlmm_purged_segments_total %d
`
	require.NoError(t, testutil.CollectAndCompare(im, strings.NewReader(fmt.Sprintf(want, 0)), "rlmm_purged_segments_total"))
	n, err := m.PurgeForgotten(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
	require.NoError(t, testutil.CollectAndCompare(im, strings.NewReader(fmt.Sprintf(want, 3)), "rlmm_purged_segments_total"))
	problems, err := testutil.CollectAndLint(im, "rlmm_purged_segments_total")
	require.NoError(t, err)
	require.Empty(t, problems)
}

// Instrument exports when the wrapped PgManager's purge last succeeded: 0
// before the first, then the time of the last purge, which a failed purge
// does not move.
func TestPurgeLastSuccessInMetrics(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.NewPool(t)
	m, err := rs.NewPgManager(ctx, pool, rs.WithForgottenRetention(0))
	require.NoError(t, err)
	defer m.Close()
	reg := prometheus.NewPedanticRegistry()
	metrics.Instrument(m, metrics.WithRegisterer(reg))
	const name = "rlmm_purge_last_success_timestamp_seconds"
	require.Zero(t, metricValue(t, reg, name, nil), "no purge yet")

	before := float64(time.Now().UnixNano()) / 1e9
	_, err = m.PurgeForgotten(ctx, 0)
	require.NoError(t, err)
	first := metricValue(t, reg, name, nil)
	require.GreaterOrEqual(t, first, before)
	require.LessOrEqual(t, first, float64(time.Now().UnixNano())/1e9)

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = m.PurgeForgotten(canceled, 0)
	require.Error(t, err)
	require.Equal(t, first, metricValue(t, reg, name, nil), "a failed purge leaves it")
	problems, err := testutil.GatherAndLint(reg, name)
	require.NoError(t, err)
	require.Empty(t, problems)
}

// Instrument counts CaughtUp's answers: false for a partition the cache
// does not consume, true once it does and has read it.
func TestCaughtUpAnswersInMetrics(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.NewPool(t)
	m, err := rs.NewPgManager(ctx, pool, rs.WithCache(), rs.WithForgottenRetention(0))
	require.NoError(t, err)
	defer m.Close()
	reg := prometheus.NewPedanticRegistry()
	im := metrics.Instrument(m, metrics.WithRegisterer(reg))
	const name = "rlmm_caught_up_answers_total"
	require.Zero(t, metricValue(t, reg, name, map[string]string{"answer": "false"}), "exported at zero from the start")
	require.Zero(t, metricValue(t, reg, name, map[string]string{"answer": "true"}))

	tp := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "orders", Partition: 0}
	ok, err := im.CaughtUp(ctx, tp)
	require.NoError(t, err)
	require.False(t, ok, "not consumed")
	require.EqualValues(t, 1, metricValue(t, reg, name, map[string]string{"answer": "false"}))

	require.NoError(t, im.OnPartitionLeadershipChanges(ctx, []rs.TopicIDPartition{tp}, nil))
	testwait.Until(t, "CaughtUp true once the partition is loaded", func() bool {
		ok, err := im.CaughtUp(ctx, tp)
		return err == nil && ok
	})
	require.EqualValues(t, 1, metricValue(t, reg, name, map[string]string{"answer": "true"}))
	problems, err := testutil.GatherAndLint(reg, name)
	require.NoError(t, err)
	require.Empty(t, problems)
}
