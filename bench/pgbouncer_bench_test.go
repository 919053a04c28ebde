package bench_test

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/rstest"
)

// BenchmarkPgBouncerFreshness: behind PgBouncer in transaction mode, commit
// on broker A to the write being in broker B's cache, read from B's memory
// (no CaughtUp to pull it forward). With WithListenerConnConfig the
// notification brings it; without, only the periodic poll
// (WithCachePollInterval, default 1 s) does.
//
//	go test -run '^$' -bench PgBouncerFreshness -benchtime 30x ./bench
func BenchmarkPgBouncerFreshness(b *testing.B) {
	pooled, direct := pgtest.NewBouncerDatabase(b)
	b.Run("listener=session", func(b *testing.B) {
		benchmarkBouncerFreshness(b, pooled, rstest.ListenerOption(b, direct))
	})
	b.Run("listener=pooler/poll=1s", func(b *testing.B) {
		benchmarkBouncerFreshness(b, pooled)
	})
	b.Run("listener=pooler/poll=100ms", func(b *testing.B) {
		benchmarkBouncerFreshness(b, pooled, rs.WithCachePollInterval(100*time.Millisecond))
	})
}

func benchmarkBouncerFreshness(b *testing.B, pooled string, opts ...rs.Option) {
	ctx := b.Context()
	newManager := func(opts ...rs.Option) *rs.PgManager {
		pool, err := pgxpool.New(ctx, pooled)
		require.NoError(b, err)
		b.Cleanup(pool.Close)
		m, err := rs.NewPgManager(ctx, pool, opts...)
		require.NoError(b, err)
		b.Cleanup(m.Close)
		return m
	}
	writer := newManager()
	reader := newManager(append(opts, rs.WithCache())...)
	tp := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "bouncer", Partition: 0}
	require.NoError(b, reader.OnPartitionLeadershipChanges(ctx, nil, []rs.TopicIDPartition{tp}))
	rstest.WaitLoaded(b, reader, tp)

	var lags []time.Duration
	i := int64(0)
	for b.Loop() {
		s := rstest.Segment(tp, i*100, i*100+99, map[rs.LeaderEpoch]int64{0: i * 100})
		i++
		require.NoError(b, writer.AddRemoteLogSegmentMetadata(ctx, s))
		require.NoError(b, writer.UpdateRemoteLogSegmentMetadata(ctx, rstest.Update(s, rs.CopySegmentFinished)))
		lags = append(lags, lagUntilCached(b, reader, s))
	}
	slices.Sort(lags)
	b.ReportMetric(float64(lags[len(lags)/2].Milliseconds()), "p50-lag-ms")
	b.ReportMetric(float64(lags[len(lags)*99/100].Milliseconds()), "p99-lag-ms")
	b.ReportMetric(float64(lags[len(lags)-1].Milliseconds()), "max-lag-ms")
}
