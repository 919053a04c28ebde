package bench_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/rstest"
	"github.com/krabka/remotestorage/internal/testwait"
)

// The cache's figures (docs/BENCHMARKS.md, "Cache and replica"):
//
//	go test -run '^$' -bench 'Cache|RawPrimaryKey' -benchtime 3s ./bench

// loadPartition writes n finished single-epoch segments to tp with SQL (a
// bulk load).
func loadPartition(b testing.TB, pool *pgxpool.Pool, tp rs.TopicIDPartition, n int) {
	b.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `
INSERT INTO rlmm_partitions (topic_id, partition, topic, max_segment_span)
VALUES ($1, $2, $3, 89)`, tp.TopicID, tp.Partition, tp.Topic)
	require.NoError(b, err)
	_, err = pool.Exec(ctx, `
INSERT INTO rlmm_segments (topic_id, partition, segment_id, topic, start_offset, end_offset, max_timestamp_ms,
    broker_id, event_timestamp_ms, segment_size_bytes, custom_metadata, state, txn_index_empty, epochs, epoch_start_offsets,
    added_version, finished_version, last_version, last_xid)
SELECT $1, $2, gen_random_uuid(), $3, i * 100, i * 100 + 89, 0, 1, 0, 1 << 20, '\x0102030405060708'::bytea, 1, true,
    ARRAY[i / 100], ARRAY[i * 100]::bigint[], 2 * i + 1, 2 * i + 2, 2 * i + 2, pg_current_xact_id()
FROM generate_series(0, $4::int - 1) i`, tp.TopicID, tp.Partition, tp.Topic, n)
	require.NoError(b, err)
	advanceVersions(b, pool, 2*int64(n))
}

// BenchmarkCacheLoad10k loads a 10k-segment partition into the cache, and
// reports the heap the cached partition holds per segment.
func BenchmarkCacheLoad10k(b *testing.B) {
	const n = 10_000
	dsn := pgtest.NewDatabase(b)
	pool := benchPool(b, dsn)
	tp := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "load", Partition: 0}
	loadPartition(b, pool, tp, n)
	var perSegment float64
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		m, err := rs.NewPgManager(b.Context(), pool, rs.WithCache())
		require.NoError(b, err)
		b.StartTimer()
		require.NoError(b, m.OnPartitionLeadershipChanges(b.Context(), []rs.TopicIDPartition{tp}, nil))
		testwait.Until(b, "the partition loaded", func() bool {
			_, err := m.CaughtUp(b.Context(), tp)
			return err == nil
		})
		b.StopTimer()
		// Build the query index too: it is part of what a cached partition holds.
		_, _, err = m.RemoteLogSegmentMetadata(b.Context(), tp, 5, 50_000)
		require.NoError(b, err)
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		perSegment = float64(after.HeapAlloc-before.HeapAlloc) / n
		m.Close()
		b.StartTimer()
	}
	b.ReportMetric(perSegment, "heap-bytes/segment")
}

// BenchmarkCachedLookup is the offset lookup answered from the cache, one
// client; BenchmarkRawPrimaryKeySelect is the database's read limit next to it.
func BenchmarkCachedLookup(b *testing.B) {
	dsn := pgtest.NewDatabase(b)
	pool := benchPool(b, dsn)
	tp := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "lookup", Partition: 0}
	loadPartition(b, pool, tp, 1000)
	m, err := rs.NewPgManager(b.Context(), pool, rs.WithCache())
	require.NoError(b, err)
	b.Cleanup(m.Close)
	require.NoError(b, m.OnPartitionLeadershipChanges(b.Context(), []rs.TopicIDPartition{tp}, nil))
	rstest.WaitLoaded(b, m, tp)
	i := int64(0)
	for b.Loop() {
		i = (i + 7919) % 100_000
		if _, _, err := m.RemoteLogSegmentMetadata(b.Context(), tp, rs.LeaderEpoch(i/10_000), i); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRawPrimaryKeySelect(b *testing.B) {
	dsn := pgtest.NewDatabase(b)
	pool := benchPool(b, dsn)
	tp := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "lookup", Partition: 0}
	loadPartition(b, pool, tp, 1000)
	var ids []uuid.UUID
	rows, err := pool.Query(b.Context(), "SELECT segment_id FROM rlmm_segments")
	require.NoError(b, err)
	for rows.Next() {
		var id uuid.UUID
		require.NoError(b, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(b, rows.Err())
	i := 0
	for b.Loop() {
		i = (i + 7919) % len(ids)
		if err := rawPrimaryKeySelect(b.Context(), pool, tp, ids[i]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCacheCommitToCaughtUp measures the lag from a commit on broker A
// to CaughtUp true on broker B, whose cache follows through notifications.
func BenchmarkCacheCommitToCaughtUp(b *testing.B) {
	dsn := pgtest.NewDatabase(b)
	a, err := rs.NewPgManager(b.Context(), benchPool(b, dsn))
	require.NoError(b, err)
	m, err := rs.NewPgManager(b.Context(), benchPool(b, dsn), rs.WithCache())
	require.NoError(b, err)
	b.Cleanup(m.Close)
	tp := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "lag", Partition: 0}
	require.NoError(b, m.OnPartitionLeadershipChanges(b.Context(), []rs.TopicIDPartition{tp}, nil))
	rstest.WaitLoaded(b, m, tp)
	measureCommitToCaughtUp(b, a, m, tp)
}
