package bench_test

import (
	"context"
	"fmt"
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
)

// Memory and work in proportion to live segments, not history: a partition
// whose retention churned through 200,000 segments, 1,000 of them live,
// next to a partition of the same 1,000 live ones only.
//
//	go test -run '^$' -bench 'Churned' -benchtime 2000x ./bench

const (
	churnLive      = 1_000
	churnForgotten = 200_000
)

// BenchmarkChurnedLookupAfterWrite: each iteration writes once to the
// partition (a retried COPY_SEGMENT_FINISHED, which changes the version and
// so the index) and times the lookup that follows; p99 reported.
func BenchmarkChurnedLookupAfterWrite(b *testing.B) {
	for _, forgotten := range []int{0, churnForgotten} {
		b.Run(fmt.Sprintf("forgotten=%d", forgotten), func(b *testing.B) {
			ctx := context.Background()
			m := rs.NewInMemoryManager()
			tp := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "churn", Partition: 0}
			var live []rs.RemoteLogSegmentMetadata
			for i := range forgotten + churnLive {
				s := rstest.Segment(tp, int64(i)*100, int64(i)*100+99, map[rs.LeaderEpoch]int64{0: int64(i) * 100})
				require.NoError(b, m.AddRemoteLogSegmentMetadata(ctx, s))
				require.NoError(b, m.UpdateRemoteLogSegmentMetadata(ctx, rstest.Update(s, rs.CopySegmentFinished)))
				if i < forgotten {
					require.NoError(b, m.UpdateRemoteLogSegmentMetadata(ctx, rstest.Update(s, rs.DeleteSegmentStarted)))
					require.NoError(b, m.UpdateRemoteLogSegmentMetadata(ctx, rstest.Update(s, rs.DeleteSegmentFinished)))
				} else {
					live = append(live, s)
				}
			}
			var lags []time.Duration
			i := 0
			for b.Loop() {
				s := live[i%len(live)]
				i++
				require.NoError(b, m.UpdateRemoteLogSegmentMetadata(ctx, rstest.Update(s, rs.CopySegmentFinished)))
				start := time.Now()
				_, ok, err := m.RemoteLogSegmentMetadata(ctx, tp, 0, s.StartOffset+50)
				lags = append(lags, time.Since(start))
				require.NoError(b, err)
				require.True(b, ok)
			}
			slices.Sort(lags)
			b.ReportMetric(float64(lags[len(lags)*99/100].Microseconds()), "p99-lookup-after-write-µs")
		})
	}
}

// BenchmarkChurnedCacheLoad: the time a cached manager takes to load the
// partition, with 200,000 forgotten rows in the database or none.
func BenchmarkChurnedCacheLoad(b *testing.B) {
	dsn := pgtest.NewDatabase(b)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	topic := uuid.New()
	// Partition 0: 1,000 live; partition 1: 200,000 forgotten, then the
	// same 1,000 live. Rows as the library writes them.
	_, err = pool.Exec(ctx, `
INSERT INTO rlmm_partitions (topic_id, partition, topic, max_segment_span)
VALUES ($1, 0, 'churn', 99), ($1, 1, 'churn', 99)`, topic)
	require.NoError(b, err)
	_, err = pool.Exec(ctx, `
INSERT INTO rlmm_segments (topic_id, partition, segment_id, topic, start_offset, end_offset, max_timestamp_ms,
    broker_id, event_timestamp_ms, segment_size_bytes, state, txn_index_empty, epochs, epoch_start_offsets,
    added_version, finished_version, last_version, last_xid)
SELECT $1, p, gen_random_uuid(), 'churn', i * 100, i * 100 + 99, i, 1, 0, 1000,
    CASE WHEN i < $3::int * p THEN 3 ELSE 1 END, true, ARRAY[0], ARRAY[i * 100]::bigint[], 2 * i + 1, 2 * i + 2, 2 * i + 2,
    pg_current_xact_id()
FROM generate_series(0, 1) p, generate_series(0, $3::int * p + $2::int - 1) i`, topic, churnLive, churnForgotten)
	require.NoError(b, err)
	advanceVersions(b, pool, 2*(churnLive+churnForgotten))
	_, err = pool.Exec(ctx, "ANALYZE rlmm_segments, rlmm_segment_epochs, rlmm_partitions")
	require.NoError(b, err)
	for p, name := range []string{"forgotten=0", fmt.Sprintf("forgotten=%d", churnForgotten)} {
		tp := rs.TopicIDPartition{TopicID: topic, Topic: "churn", Partition: int32(p)}
		b.Run(name, func(b *testing.B) {
			m, err := rs.NewPgManager(ctx, pool, rs.WithCache(), rs.WithCachePollInterval(0))
			require.NoError(b, err)
			defer m.Close()
			for b.Loop() {
				require.NoError(b, m.OnPartitionLeadershipChanges(ctx, []rs.TopicIDPartition{tp}, nil))
				rstest.WaitLoaded(b, m, tp)
				b.StopTimer()
				list, err := m.ListRemoteLogSegments(ctx, tp)
				require.NoError(b, err)
				require.Len(b, list, churnLive)
				require.NoError(b, m.OnStopPartitions(ctx, []rs.TopicIDPartition{tp}))
				b.StartTimer()
			}
		})
	}
}

// With purging, the tables follow what is live, not history: a partition
// keeps its live segments while each of 40 rounds adds, finishes and
// deletes as many more, then purges them and runs a plain VACUUM. The rlmm
// tables' size at round 40 is at most 1.25× their size at round 10. Small
// here (10 segments a round), to run in the tests: without the purge the
// same run grows 1.5×. BenchmarkChurnSize runs it at 200 segments a round.
func TestChurnSizeFollowsLiveSegments(t *testing.T) {
	t.Parallel()
	at10, at40 := churnSizes(t, 10, 10, true)
	t.Logf("round 10: %d kB, round 40: %d kB (%.2f×)", at10/1024, at40/1024, float64(at40)/float64(at10))
	require.LessOrEqual(t, float64(at40), 1.25*float64(at10), "the tables grew with history")
}

// BenchmarkChurnSize is the churn of TestChurnSizeFollowsLiveSegments at
// 200 live segments and 200 a round, with the purge and without it (the
// baseline), reporting the tables' size at rounds 10 and 40.
//
//	go test -run '^$' -bench 'ChurnSize' -benchtime 1x ./bench
func BenchmarkChurnSize(b *testing.B) {
	for _, purge := range []bool{true, false} {
		b.Run(fmt.Sprintf("purge=%t", purge), func(b *testing.B) {
			for b.Loop() {
				at10, at40 := churnSizes(b, 200, 200, purge)
				b.ReportMetric(float64(at10)/1024, "kB-round-10")
				b.ReportMetric(float64(at40)/1024, "kB-round-40")
				b.ReportMetric(float64(at40)/float64(at10), "growth")
			}
		})
	}
}

// churnSizes runs 40 rounds of churn on one partition that keeps live
// segments: each round adds, finishes and deletes perRound segments, then
// (with purge) purges them, then runs a plain VACUUM. It returns the
// tables' size after rounds 10 and 40.
func churnSizes(t testing.TB, live, perRound int, purge bool) (at10, at40 int64) {
	const rounds, writers = 40, 4
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	defer pool.Close()
	m, err := rs.NewPgManager(ctx, pool, rs.WithForgottenRetention(0))
	require.NoError(t, err)
	defer m.Close()
	tp := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "churn", Partition: 0}
	next := int64(0)
	// write adds n segments after the last one, finishing each, and
	// deleting each when forget is set; writers at once.
	write := func(n int, forget bool) {
		segs := make([]rs.RemoteLogSegmentMetadata, n)
		for i := range segs {
			segs[i] = rstest.Segment(tp, next*100, next*100+99, map[rs.LeaderEpoch]int64{0: next * 100})
			next++
		}
		states := []rs.RemoteLogSegmentState{rs.CopySegmentFinished}
		if forget {
			states = append(states, rs.DeleteSegmentStarted, rs.DeleteSegmentFinished)
		}
		errs := make([]error, writers)
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := w; i < n && errs[w] == nil; i += writers {
					errs[w] = m.AddRemoteLogSegmentMetadata(ctx, segs[i])
					for _, st := range states {
						if errs[w] == nil {
							errs[w] = m.UpdateRemoteLogSegmentMetadata(ctx, rstest.Update(segs[i], st))
						}
					}
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
	}
	size := func() int64 {
		var n int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT sum(pg_total_relation_size(c))::bigint
			FROM unnest(ARRAY['rlmm_partitions', 'rlmm_segments', 'rlmm_segment_epochs', 'rlmm_epoch_ends']::regclass[]) c`).Scan(&n))
		return n
	}
	write(live, false)
	for round := 1; round <= rounds; round++ {
		write(perRound, true)
		if purge {
			n, err := m.PurgeForgotten(ctx, 0)
			require.NoError(t, err)
			require.Equal(t, int64(perRound), n, "round %d", round)
		}
		_, err = pool.Exec(ctx, "VACUUM rlmm_partitions, rlmm_segments, rlmm_segment_epochs, rlmm_epoch_ends")
		require.NoError(t, err)
		switch round {
		case 10:
			at10 = size()
		case rounds:
			at40 = size()
		}
	}
	list, err := m.ListRemoteLogSegments(ctx, tp)
	require.NoError(t, err)
	require.Len(t, list, live)
	return at10, at40
}
