package metrics

// stuck_collector.go: the count of stuck work (remotestorage.CountStuckWork)
// as Prometheus gauges, computed on each scrape, so that operators can alert
// on it.

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	rs "github.com/krabka/remotestorage"
)

// StuckCollector is a prometheus.Collector of two gauges, computed on every
// scrape by one query over rlmm_stuck_v:
//
//	rlmm_stuck_segments{state="COPY_SEGMENT_STARTED"|"DELETE_SEGMENT_STARTED"}
//	rlmm_stuck_partitions{state="DELETE_PARTITION_MARKED"|"DELETE_PARTITION_STARTED"}
//
// Every state is always exported, 0 when nothing is stuck in it, so an
// alert on "> 0" needs no absent() clause. When the query fails or times
// out, the scrape reports an invalid metric (Prometheus counts the scrape
// as failed) rather than a misleading 0.
type StuckCollector struct {
	pool      *pgxpool.Pool
	olderThan time.Duration
	timeout   time.Duration
	segments  *prometheus.Desc
	parts     *prometheus.Desc
}

func newStuckSegmentsDesc(labels prometheus.Labels) *prometheus.Desc {
	return prometheus.NewDesc("rlmm_stuck_segments",
		"Segments in COPY_SEGMENT_STARTED or DELETE_SEGMENT_STARTED with no write for longer than the collector's threshold (rlmm_stuck_v).",
		[]string{"state"}, labels)
}

func newStuckPartitionsDesc(labels prometheus.Labels) *prometheus.Desc {
	return prometheus.NewDesc("rlmm_stuck_partitions",
		"Partitions in DELETE_PARTITION_MARKED or DELETE_PARTITION_STARTED with no write for longer than the collector's threshold (rlmm_stuck_v).",
		[]string{"state"}, labels)
}

// NewStuckCollector returns a collector of the stuck work older than
// olderThan (see remotestorage.StuckWork); register it where the application serves its
// metrics. A negative olderThan is an error.
func NewStuckCollector(pool *pgxpool.Pool, olderThan time.Duration, opts ...StuckCollectorOption) (*StuckCollector, error) {
	if olderThan < 0 {
		return nil, fmt.Errorf("remotestorage/metrics: stuck collector: the threshold %s is negative; want 0 or more (0: everything in flight)", olderThan)
	}
	c := &StuckCollector{pool: pool, olderThan: olderThan, timeout: 5 * time.Second,
		segments: newStuckSegmentsDesc(nil), parts: newStuckPartitionsDesc(nil)}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Describe implements prometheus.Collector.
func (c *StuckCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.segments
	ch <- c.parts
}

// Collect implements prometheus.Collector: one query, bounded by the
// scrape timeout.
func (c *StuckCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	rows, err := rs.CountStuckWork(ctx, c.pool, c.olderThan)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.segments, err)
		ch <- prometheus.NewInvalidMetric(c.parts, err)
		return
	}
	counts := map[string]int64{}
	for _, r := range rows {
		counts[string(r.Kind)+"/"+r.State] = r.Count
	}
	for _, st := range []rs.RemoteLogSegmentState{rs.CopySegmentStarted, rs.DeleteSegmentStarted} {
		ch <- prometheus.MustNewConstMetric(c.segments, prometheus.GaugeValue,
			float64(counts[string(rs.StuckSegment)+"/"+st.String()]), st.String())
	}
	for _, st := range []rs.RemotePartitionDeleteState{rs.DeletePartitionMarked, rs.DeletePartitionStarted} {
		ch <- prometheus.MustNewConstMetric(c.parts, prometheus.GaugeValue,
			float64(counts[string(rs.StuckPartition)+"/"+st.String()]), st.String())
	}
}
