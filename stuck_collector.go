package remotestorage

// stuck_collector.go: the count of stuck work (see stuck.go) as Prometheus
// gauges, computed on each scrape, so that operators can alert on it.

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/krabka/remotestorage/internal/db"
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
// olderThan (see StuckWork); register it where the application serves its
// metrics. A negative olderThan is an error.
func NewStuckCollector(pool *pgxpool.Pool, olderThan time.Duration, opts ...StuckCollectorOption) (*StuckCollector, error) {
	if err := checkOlderThan(olderThan); err != nil {
		return nil, err
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
	rows, err := db.New().StuckCounts(ctx, c.pool, c.olderThan.Milliseconds())
	if err != nil {
		err = ioError(ctx, err, "count the stuck work older than %s", c.olderThan)
		ch <- prometheus.NewInvalidMetric(c.segments, err)
		ch <- prometheus.NewInvalidMetric(c.parts, err)
		return
	}
	counts := map[string]int64{}
	for _, r := range rows {
		counts[r.Kind+"/"+r.State] = r.Stuck
	}
	for _, st := range []RemoteLogSegmentState{CopySegmentStarted, DeleteSegmentStarted} {
		ch <- prometheus.MustNewConstMetric(c.segments, prometheus.GaugeValue,
			float64(counts[string(StuckSegment)+"/"+st.String()]), st.String())
	}
	for _, st := range []RemotePartitionDeleteState{DeletePartitionMarked, DeletePartitionStarted} {
		ch <- prometheus.MustNewConstMetric(c.parts, prometheus.GaugeValue,
			float64(counts[string(StuckPartition)+"/"+st.String()]), st.String())
	}
}
