// Helpers shared by the benchmarks (those the root package's tests share
// too are in internal/rstest).

package bench_test

import (
	"context"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/dbuuid"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/rstest"
)

// benchPool opens a pool of pgxpool's default size on dsn.
func benchPool(b *testing.B, dsn string) *pgxpool.Pool {
	b.Helper()
	return rstest.NewPool(b, dsn, 0, false)
}

// countedPool opens a pool of maxConns connections on dsn whose statements
// the returned counter counts (counts only: a benchmark's counter does not
// grow).
func countedPool(tb testing.TB, dsn string, maxConns int) (*pgxpool.Pool, *rstest.StatementCounter) {
	tb.Helper()
	counter := &rstest.StatementCounter{CountOnly: true}
	cfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(tb, err)
	cfg.MaxConns = int32(maxConns)
	cfg.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(tb.Context(), cfg)
	require.NoError(tb, err)
	tb.Cleanup(pool.Close)
	return pool, counter
}

// parallel runs op from clients goroutines, b.N calls in all.
func parallel(b *testing.B, clients int, op func(ctx context.Context, rng *rand.Rand) error) {
	b.SetParallelism(max(1, clients/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewPCG(rand.Uint64(), 0))
		for pb.Next() {
			if err := op(b.Context(), rng); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// lagUntilCached spins on reader's cache, without a round trip or a
// CaughtUp to pull it forward, until it holds s finished, and returns how
// long that took from the call.
func lagUntilCached(b *testing.B, reader *rs.PgManager, s rs.RemoteLogSegmentMetadata) time.Duration {
	committed := time.Now()
	for {
		got, ok, err := reader.RemoteLogSegmentMetadata(b.Context(), s.SegmentID.TopicIDPartition, 0, s.StartOffset)
		require.NoError(b, err)
		if ok && got.State == rs.CopySegmentFinished {
			return time.Since(committed)
		}
		if time.Since(committed) > 10*time.Second {
			b.Fatal("the write never reached the other cache")
		}
		runtime.Gosched()
	}
}

// measureCommitToCaughtUp adds a segment through writer per iteration and
// reports the time until reader's CaughtUp says true (p50 and p99).
func measureCommitToCaughtUp(b *testing.B, writer, reader rs.RemoteLogMetadataManager, tp rs.TopicIDPartition) {
	var lags []time.Duration
	i := int64(0)
	for b.Loop() {
		s := rstest.Segment(tp, i*10, i*10+9, map[rs.LeaderEpoch]int64{0: i * 10})
		i++
		require.NoError(b, writer.AddRemoteLogSegmentMetadata(b.Context(), s))
		committed := time.Now()
		for {
			ok, err := reader.CaughtUp(b.Context(), tp)
			require.NoError(b, err)
			if ok {
				break
			}
		}
		lags = append(lags, time.Since(committed))
	}
	slices.Sort(lags)
	b.ReportMetric(float64(lags[len(lags)/2].Microseconds()), "p50-lag-µs")
	b.ReportMetric(float64(lags[len(lags)*99/100].Microseconds()), "p99-lag-µs")
}

type writeFloor struct {
	pool    *pgxpool.Pool
	m       *rs.PgManager
	clients int
	topic   uuid.UUID
	next    atomic.Int64
}

// libraryAddFinish is an add then its COPY_SEGMENT_FINISHED (BenchmarkFresh's
// "add + finish" too): call i writes to partition i mod clients.
func libraryAddFinish(ctx context.Context, w *writeFloor, _ *rand.Rand) error {
	i := w.next.Add(1)
	tp := rs.TopicIDPartition{TopicID: w.topic, Topic: "writes", Partition: int32(i % int64(w.clients))}
	s := rstest.Segment(tp, i*100, i*100+99, map[rs.LeaderEpoch]int64{0: i * 100})
	if err := w.m.AddRemoteLogSegmentMetadata(ctx, s); err != nil {
		return err
	}
	return w.m.UpdateRemoteLogSegmentMetadata(ctx, rstest.Update(s, rs.CopySegmentFinished))
}

// writeFloorDatabase is a migrated database of its own, nothing analyzed,
// with setup run on it.
func writeFloorDatabase(b *testing.B, setup string) string {
	dsn := pgtest.NewDatabase(b)
	if setup != "" {
		_, err := rstest.NewPool(b, dsn, 1, false).Exec(b.Context(), setup)
		require.NoError(b, err)
	}
	return dsn
}

type writeFloorOp func(ctx context.Context, w *writeFloor, rng *rand.Rand) error

// rawTwoCommits is the baseline of BenchmarkFresh's writes: two single-row
// HOT UPDATE commits.
func rawTwoCommits(ctx context.Context, w *writeFloor, rng *rand.Rand) error {
	for range 2 {
		if _, err := w.pool.Exec(ctx, "UPDATE bench_raw SET event_timestamp_ms = $2 WHERE id = $1", rng.IntN(2000), rng.Int64()); err != nil {
			return err
		}
	}
	return nil
}

// rawPrimaryKeySelect is the lookups' baseline: a raw pgx primary-key SELECT
// of one rlmm_segments row, every column scanned into Go values.
func rawPrimaryKeySelect(ctx context.Context, pool *pgxpool.Pool, tp rs.TopicIDPartition, id uuid.UUID) error {
	var (
		seg                        dbuuid.UUID
		topic                      string
		start, end, maxTS, eventTS int64
		broker, size               int32
		custom                     []byte
		state                      int16
		txnEmpty                   bool
		epochs                     []int32
		epochStarts                []int64
		added, last                int64
	)
	return pool.QueryRow(ctx, `SELECT segment_id, topic, start_offset, end_offset, max_timestamp_ms, event_timestamp_ms,
		broker_id, segment_size_bytes, custom_metadata, state, txn_index_empty, epochs, epoch_start_offsets, added_version, last_version
		FROM rlmm_segments WHERE topic_id = $1 AND partition = $2 AND segment_id = $3`, dbuuid.UUID(tp.TopicID), tp.Partition, dbuuid.UUID(id)).
		Scan(&seg, &topic, &start, &end, &maxTS, &eventTS, &broker, &size, &custom, &state, &txnEmpty, &epochs, &epochStarts, &added, &last)
}

// advanceVersions moves rlmm_versions, the library's write order, past
// last, the largest version that rows inserted with plain SQL took, so that
// the library's later writes take larger ones.
func advanceVersions(tb testing.TB, pool *pgxpool.Pool, last int64) {
	tb.Helper()
	_, err := pool.Exec(context.Background(), "SELECT setval('rlmm_versions', greatest(nextval('rlmm_versions'), $1::bigint))", last)
	require.NoError(tb, err)
}
