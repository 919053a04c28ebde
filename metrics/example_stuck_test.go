package metrics_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/metrics"
)

// Alert on stuck work: the collector counts, on each scrape, what has made
// no progress for an hour (rlmm_stuck_segments{state},
// rlmm_stuck_partitions{state}); StuckWork lists it.
func ExampleNewStuckCollector() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()

	c, err := metrics.NewStuckCollector(pool, time.Hour, metrics.WithStuckScrapeTimeout(5*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	// Alert: max(rlmm_stuck_segments) > 0 for 15m

	report, err := rs.StuckWork(ctx, pool, time.Hour)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, it := range report.Items {
		fmt.Printf("%s %s-%d %s broker %d for %s\n", it.Kind, it.Partition.Topic, it.Partition.Partition, it.State, it.BrokerID, it.Age)
	}
}
