package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/metrics"
)

// seedStuckWork writes, in orders-0, an upload left in COPY_SEGMENT_STARTED
// and a deletion left in DELETE_SEGMENT_STARTED, both aged two hours, and
// marks payments-0 for deletion just now.
func seedStuckWork(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := t.Context()
	m, err := rs.NewPgManager(ctx, pool)
	require.NoError(t, err)
	defer m.Close()
	now := time.Now().UnixMilli()
	orders := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "orders", Partition: 0}
	payments := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "payments", Partition: 0}
	add := func(start int64, states ...rs.RemoteLogSegmentState) uuid.UUID {
		id := rs.RemoteLogSegmentID{TopicIDPartition: orders, ID: uuid.New()}
		require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadata{
			SegmentID: id, StartOffset: start, EndOffset: start + 999, BrokerID: 1, EventTimestampMs: now,
			State: rs.CopySegmentStarted, SegmentLeaderEpochs: map[rs.LeaderEpoch]int64{0: start}, TxnIndexEmpty: true,
		}))
		for _, st := range states {
			require.NoError(t, m.UpdateRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadataUpdate{
				SegmentID: id, State: st, BrokerID: 2, EventTimestampMs: now,
			}))
		}
		return id.ID
	}
	stuckCopy := add(0)
	stuckDelete := add(1000, rs.CopySegmentFinished, rs.DeleteSegmentStarted)
	require.NoError(t, m.PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{
		TopicIDPartition: payments, State: rs.DeletePartitionMarked, BrokerID: 3, EventTimestampMs: now}))
	// Timestamps are not states: the guard triggers let this by.
	_, err = pool.Exec(ctx, `UPDATE rlmm_segments SET updated_at = now() - interval '2 hours' WHERE segment_id = ANY($1)`,
		[]uuid.UUID{stuckCopy, stuckDelete})
	require.NoError(t, err)
}

func TestStuckCollector(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	seedStuckWork(t, pool)
	_, err := pool.Exec(t.Context(), `UPDATE rlmm_partitions SET updated_at = now() - interval '2 hours' WHERE topic = 'payments'`)
	require.NoError(t, err)

	c, err := metrics.NewStuckCollector(pool, time.Hour, metrics.WithStuckConstLabels(prometheus.Labels{"cluster": "test"}))
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP rlmm_stuck_partitions Partitions in DELETE_PARTITION_MARKED or DELETE_PARTITION_STARTED with no write for longer than the collector's threshold (rlmm_stuck_v).
# TYPE rlmm_stuck_partitions gauge
rlmm_stuck_partitions{cluster="test",state="DELETE_PARTITION_MARKED"} 1
rlmm_stuck_partitions{cluster="test",state="DELETE_PARTITION_STARTED"} 0
# HELP rlmm_stuck_segments Segments in COPY_SEGMENT_STARTED or DELETE_SEGMENT_STARTED with no write for longer than the collector's threshold (rlmm_stuck_v).
# TYPE rlmm_stuck_segments gauge
rlmm_stuck_segments{cluster="test",state="COPY_SEGMENT_STARTED"} 1
rlmm_stuck_segments{cluster="test",state="DELETE_SEGMENT_STARTED"} 1
`)))

	// Computed on scrape: a repair shows at the next one.
	_, err = pool.Exec(t.Context(), `UPDATE rlmm_segments SET state = 1 WHERE state = 0 AND topic = 'orders'`)
	require.NoError(t, err)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP rlmm_stuck_segments Segments in COPY_SEGMENT_STARTED or DELETE_SEGMENT_STARTED with no write for longer than the collector's threshold (rlmm_stuck_v).
# TYPE rlmm_stuck_segments gauge
rlmm_stuck_segments{cluster="test",state="COPY_SEGMENT_STARTED"} 0
rlmm_stuck_segments{cluster="test",state="DELETE_SEGMENT_STARTED"} 1
`), "rlmm_stuck_segments"))

	// A failing store fails the scrape instead of reporting 0.
	closed := pgtest.NewPool(t)
	closed.Close()
	bad, err := metrics.NewStuckCollector(closed, time.Hour, metrics.WithStuckScrapeTimeout(time.Second))
	require.NoError(t, err)
	reg = prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(bad))
	_, err = reg.Gather()
	require.ErrorContains(t, err, rs.ErrIO.Error(), "prometheus joins the collect errors without Unwrap")

	_, err = metrics.NewStuckCollector(pool, -time.Minute)
	require.ErrorContains(t, err, "negative")
}
