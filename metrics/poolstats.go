package metrics

// poolstats.go: WithPoolStats's collector, the statistics of the pgx pools
// as Prometheus metrics, read at each scrape.

import (
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

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
