package remotestorage_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
)

// BenchmarkCacheReady1M: a broker with WithCache is assigned 1,000
// partitions of 1,000 finished segments each (1M segments) and becomes
// ready: every partition loaded and CaughtUp true. Reports the time to
// ready and the heap the cache holds per segment. The loaders' parallelism
// is the manager's pool: each partition loads in one REPEATABLE READ
// transaction on one of its connections (here 4, pgxpool's default on two
// cores would be 4 too), so loading never takes more than the pool from
// the database.
//
//	go test -run '^$' -bench 'CacheReady1M' -benchtime 1x .
func BenchmarkCacheReady1M(b *testing.B) {
	const partitions, perPartition = 1000, 1000
	ctx := context.Background()
	dsn := pgtest.NewDatabase(b)
	admin, err := pgxpool.New(ctx, dsn)
	require.NoError(b, err)
	b.Cleanup(admin.Close)
	topic := uuid.New()
	for _, sql := range []string{`
INSERT INTO rlmm_partitions (topic_id, partition, topic, version, max_epoch_span)
SELECT $1, p, 'ready', 2 * $3::int, 99 FROM generate_series(0, $2::int - 1) p`, `
INSERT INTO rlmm_segments (topic_id, partition, segment_id, topic, start_offset, end_offset, max_timestamp_ms,
    broker_id, event_timestamp_ms, segment_size_bytes, state, txn_index_empty, epochs, epoch_start_offsets,
    added_version, finished_version, last_version)
SELECT $1, p, gen_random_uuid(), 'ready', i * 100, i * 100 + 99, i, 1, 0, 1000, 1, true,
    ARRAY[i / 100], ARRAY[i * 100]::bigint[], 2 * i + 1, 2 * i + 2, 2 * i + 2
FROM generate_series(0, $2::int - 1) p, generate_series(0, $3::int - 1) i`, `
INSERT INTO rlmm_segment_epochs (topic_id, partition, segment_id, epoch, first_offset, last_offset, state,
    segment_start_offset, segment_end_offset, added_version, finished_version, last_version)
SELECT topic_id, partition, segment_id, epochs[1], start_offset, end_offset, state, start_offset, end_offset,
    added_version, finished_version, last_version FROM rlmm_segments WHERE topic_id = $1 AND $2::int > 0 AND $3::int > 0`, `
INSERT INTO rlmm_epoch_ends (topic_id, partition, epoch, end_offset, max_segment_span, raised_version)
SELECT topic_id, partition, epoch, max(last_offset), 99, max(last_version) FROM rlmm_segment_epochs
WHERE topic_id = $1 AND $2::int > 0 AND $3::int > 0 GROUP BY topic_id, partition, epoch`,
	} {
		_, err := admin.Exec(ctx, sql, topic, partitions, perPartition)
		require.NoError(b, err)
	}
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

	for b.Loop() {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		m, err := rs.NewPgManager(ctx, pool, rs.WithCache())
		require.NoError(b, err)
		start := time.Now()
		require.NoError(b, m.OnPartitionLeadershipChanges(ctx, tps, nil))
		for _, tp := range tps {
			for {
				ok, err := m.CaughtUp(ctx, tp)
				if err == nil && ok {
					break
				}
				time.Sleep(time.Millisecond) // waits for the load, which runs in the background
			}
		}
		ready := time.Since(start)
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		b.ReportMetric(ready.Seconds(), "s-to-ready")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(partitions*perPartition), "heap-B/segment")
		runtime.KeepAlive(m)
		m.Close()
	}
}
