package bench_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/rstest"
	"github.com/krabka/remotestorage/internal/testwait"
)

// BenchmarkCacheReady1M: a broker with WithCache is assigned 1,000
// partitions of 1,000 finished segments each (1M segments) and becomes
// ready: every partition loaded and CaughtUp true. Reports the time to
// ready, the heap the cache holds per segment, and what loading costs
// others: the p99 of another broker's lookups and of the loading broker's
// own writes, against the same with nobody loading. Each partition loads
// in one REPEATABLE READ transaction on one connection of the manager's
// pool (4 here, pgxpool's default on two cores); WithCacheLoaders bounds
// how many at once (default: half the pool), one sub-benchmark each.
//
//	go test -run '^$' -bench 'CacheReady1M' -benchtime 1x ./bench
func BenchmarkCacheReady1M(b *testing.B) {
	const partitions, perPartition = 1000, 1000
	ctx := context.Background()
	dsn := pgtest.NewDatabase(b)
	admin, err := pgxpool.New(ctx, dsn)
	require.NoError(b, err)
	b.Cleanup(admin.Close)
	topic := uuid.New()
	_, err = admin.Exec(ctx, `
INSERT INTO rlmm_partitions (topic_id, partition, topic, max_segment_span)
SELECT $1, p, 'ready', 99 FROM generate_series(0, $2::int - 1) p`, topic, partitions)
	require.NoError(b, err)
	_, err = admin.Exec(ctx, `
INSERT INTO rlmm_segments (topic_id, partition, segment_id, topic, start_offset, end_offset, max_timestamp_ms,
    broker_id, event_timestamp_ms, segment_size_bytes, state, txn_index_empty, epochs, epoch_start_offsets,
    added_version, finished_version, last_version, last_xid)
SELECT $1, p, gen_random_uuid(), 'ready', i * 100, i * 100 + 99, i, 1, 0, 1000, 1, true,
    ARRAY[i / 100], ARRAY[i * 100]::bigint[], 2 * i + 1, 2 * i + 2, 2 * i + 2, pg_current_xact_id()
FROM generate_series(0, $2::int - 1) p, generate_series(0, $3::int - 1) i`, topic, partitions, perPartition)
	require.NoError(b, err)
	advanceVersions(b, admin, 2*perPartition)
	_, err = admin.Exec(ctx, "VACUUM ANALYZE rlmm_partitions, rlmm_segments, rlmm_segment_epochs, rlmm_epoch_ends")
	require.NoError(b, err)
	tps := make([]rs.TopicIDPartition, partitions)
	for p := range tps {
		tps[p] = rs.TopicIDPartition{TopicID: topic, Topic: "ready", Partition: int32(p)}
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(b, err)
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(b, err)
	b.Cleanup(pool.Close)

	// Another broker keeps looking segments up, uncached, while this one
	// loads: its latency, against the same loop with nobody loading, says
	// whether loading starves the database.
	other, err := rs.NewPgManager(ctx, admin)
	require.NoError(b, err)
	b.Cleanup(other.Close)
	otherLookup := func(by rs.RemoteLogMetadataManager, i int) error {
		_, ok, err := by.RemoteLogSegmentMetadata(ctx, tps[i%partitions], 0, int64(i%100)*100+50)
		if err == nil && !ok {
			err = errors.New("the lookup missed")
		}
		return err
	}
	// The loading broker's own writes meanwhile (to a partition it does
	// not consume): they share the pool with the loaders.
	ownWrites := func() func(by rs.RemoteLogMetadataManager, i int) error {
		tp := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "own", Partition: 0}
		return func(by rs.RemoteLogMetadataManager, i int) error {
			start := int64(i) * 100
			return by.AddRemoteLogSegmentMetadata(ctx, rstest.Segment(tp, start, start+99, map[rs.LeaderEpoch]int64{0: start}))
		}
	}
	// measure times op, called by by again and again while during runs, and
	// returns the sorted latencies.
	measure := func(op func(by rs.RemoteLogMetadataManager, i int) error, by rs.RemoteLogMetadataManager, during func()) []time.Duration {
		stop := make(chan struct{})
		var lags []time.Duration
		var opErr error
		var wg sync.WaitGroup
		wg.Go(func() {
			for i := 0; opErr == nil; i++ {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				opErr = op(by, i)
				lags = append(lags, time.Since(start))
			}
		})
		during()
		close(stop)
		wg.Wait()
		require.NoError(b, opErr)
		slices.Sort(lags)
		return lags
	}
	idle := measure(otherLookup, other, func() { time.Sleep(2 * time.Second) }) // baselines of a fixed length, not a synchronisation
	ownIdle := measure(ownWrites(), other, func() { time.Sleep(2 * time.Second) })
	p99 := func(lags []time.Duration) float64 { return float64(lags[len(lags)*99/100].Microseconds()) }

	for _, loaders := range []int{2, 3, 4} {
		b.Run(fmt.Sprintf("loaders=%d", loaders), func(b *testing.B) {
			for b.Loop() {
				runtime.GC()
				var before runtime.MemStats
				runtime.ReadMemStats(&before)
				m, err := rs.NewPgManager(ctx, pool, rs.WithCache(), rs.WithCacheLoaders(loaders))
				require.NoError(b, err)
				var ready time.Duration
				var own []time.Duration
				others := measure(otherLookup, other, func() {
					own = measure(ownWrites(), m, func() {
						start := time.Now()
						require.NoError(b, m.OnPartitionLeadershipChanges(ctx, tps, nil))
						for _, tp := range tps {
							testwait.Until(b, "the load of "+tp.String(), func() bool { // the load runs in the background
								ok, err := m.CaughtUp(ctx, tp)
								return err == nil && ok
							})
						}
						ready = time.Since(start)
					})
				})
				runtime.GC()
				var after runtime.MemStats
				runtime.ReadMemStats(&after)
				b.ReportMetric(ready.Seconds(), "s-to-ready")
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(partitions*perPartition), "heap-B/segment")
				b.ReportMetric(p99(idle), "other-lookup-p99-idle-µs")
				b.ReportMetric(p99(others), "other-lookup-p99-µs")
				b.ReportMetric(p99(ownIdle), "own-write-p99-idle-µs")
				b.ReportMetric(p99(own), "own-write-p99-µs")
				runtime.KeepAlive(m)
				m.Close()
			}
		})
	}
}
