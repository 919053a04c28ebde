package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/sampledata"
	"github.com/krabka/remotestorage/metrics"
)

// TestStuckCollector: the collector reports the work stuck longer than its
// threshold per state (rlmm_stuck_v), reads it again at each scrape (a
// repair through rlmm_set_segment_state shows at the next one), fails the
// scrape of a store it cannot read, and refuses a negative threshold.
func TestStuckCollector(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	sampledata.Seed(t, pool)
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

	// Computed on scrape: a repair (through the repair function, as a DBA
	// makes it) shows at the next one.
	var repaired int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(rlmm_set_segment_state(segment_id, 'COPY_SEGMENT_FINISHED'))
		FROM rlmm_segments WHERE state = 0 AND topic = 'orders'`).Scan(&repaired))
	require.Equal(t, 1, repaired)
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
