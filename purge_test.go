package remotestorage_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/testwait"
	"github.com/krabka/remotestorage/rlmmtest"
)

// PurgeForgotten's contract (rlmmtest.RunPurge), on both managers, each
// on a store of its own.
func TestPurgeForgotten(t *testing.T) {
	t.Parallel()
	t.Run("InMemoryManager", func(t *testing.T) {
		rlmmtest.RunPurge(t, func(t *testing.T) rlmmtest.Purger { return rs.NewInMemoryManager() })
	})
	t.Run("PgManager", func(t *testing.T) {
		rlmmtest.RunPurge(t, func(t *testing.T) rlmmtest.Purger { return newPurgeManager(t, pgtest.NewDatabase(t)) })
	})
}

// newPurgeManager is a PgManager with no background purge, over its own pool.
func newPurgeManager(t *testing.T, dsn string, opts ...rs.Option) *rs.PgManager {
	t.Helper()
	return newManager(t, newPool(t, dsn, 0, false), append([]rs.Option{rs.WithForgottenRetention(0)}, opts...)...)
}

// Two managers purging at once delete each forgotten segment once: their
// counts add up to the forgotten segments, and none is left.
func TestPurgeConcurrentManagers(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.NewDatabase(t)
	writer := newPurgeManager(t, dsn)
	const partitions, perPartition = 4, 150
	var forgotten int64
	for p := range int32(partitions) {
		tp := testTP(p)
		for i := range int64(perPartition) {
			s := segment(tp, i*100, i*100+99, map[rs.LeaderEpoch]int64{0: i * 100})
			require.NoError(t, writer.AddRemoteLogSegmentMetadata(ctx, s))
			states := []rs.RemoteLogSegmentState{rs.CopySegmentFinished}
			if i%3 != 0 || p == 0 {
				states = append(states, rs.DeleteSegmentStarted, rs.DeleteSegmentFinished)
				forgotten++
			}
			for _, st := range states {
				require.NoError(t, writer.UpdateRemoteLogSegmentMetadata(ctx, update(s, st)))
			}
		}
		if p == 0 {
			continue
		}
		if p == 1 { // a deleted partition: all its segments are forgotten
			for _, st := range []rs.RemotePartitionDeleteState{rs.DeletePartitionMarked, rs.DeletePartitionStarted, rs.DeletePartitionFinished} {
				require.NoError(t, writer.PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{TopicIDPartition: tp, State: st}))
			}
			forgotten += perPartition / 3
		}
	}
	purgers := []*rs.PgManager{newPurgeManager(t, dsn, rs.WithPurgeBatchSize(20)), newPurgeManager(t, dsn, rs.WithPurgeBatchSize(20))}
	counts := make([]int64, len(purgers))
	errs := make([]error, len(purgers))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, m := range purgers {
		wg.Go(func() {
			<-start
			counts[i], errs[i] = m.PurgeForgotten(ctx, 0)
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	t.Logf("purged %d and %d of %d", counts[0], counts[1], forgotten)
	require.Equal(t, forgotten, counts[0]+counts[1])
	pool := newPool(t, dsn, 0, false)
	var left, epochRows, deleted int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM rlmm_segments WHERE state = 3),
		(SELECT count(*) FROM rlmm_segment_epochs e WHERE NOT EXISTS (
			SELECT 1 FROM rlmm_segments s WHERE s.topic_id = e.topic_id AND s.partition = e.partition AND s.segment_id = e.segment_id)),
		(SELECT count(*) FROM rlmm_partitions WHERE delete_state IS NOT NULL)`).Scan(&left, &epochRows, &deleted))
	require.Zero(t, left, "forgotten segments left")
	require.Zero(t, epochRows, "epoch rows of purged segments left")
	require.Zero(t, deleted, "delete records left")
	require.Equal(t, forgotten, int64(partitions*perPartition)-countRows(t, pool, "rlmm_segments"))
}

func countRows(t *testing.T, pool *pgxpool.Pool, table string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM "+table).Scan(&n))
	return n
}

// A PgManager purges in the background with a short retention; with 0 it
// does not purge at all.
func TestPurgeInBackground(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.NewDatabase(t)
	writer := newPurgeManager(t, dsn)
	require.False(t, writer.PurgesInBackground(), "WithForgottenRetention(0) turns the background purge off")
	tp := testTP(0)
	s := segment(tp, 0, 99, map[rs.LeaderEpoch]int64{0: 0})
	require.NoError(t, writer.AddRemoteLogSegmentMetadata(ctx, s))
	for _, st := range []rs.RemoteLogSegmentState{rs.DeleteSegmentStarted, rs.DeleteSegmentFinished} {
		require.NoError(t, writer.UpdateRemoteLogSegmentMetadata(ctx, update(s, st)))
	}
	pool := newPool(t, dsn, 0, false)
	def, err := rs.NewPgManager(ctx, pool)
	require.NoError(t, err)
	require.True(t, def.PurgesInBackground(), "on by default")
	def.Close()

	m, err := rs.NewPgManager(ctx, pool, rs.WithForgottenRetention(time.Millisecond))
	require.NoError(t, err)
	defer m.Close()
	testwait.Until(t, "the background purge", func() bool { return m.PurgedSegments() == 1 })
	require.Zero(t, countRows(t, pool, "rlmm_segments"))
	require.NoError(t, writer.AddRemoteLogSegmentMetadata(ctx, s), "the purged id may be added again")
}

// An InMemoryManager purges, as it writes, what its retention expired.
func TestPurgeInMemoryRetention(t *testing.T) {
	t.Parallel()
	for _, retention := range []time.Duration{0, time.Hour} {
		t.Run(fmt.Sprint(retention), func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			m := rs.NewInMemoryManager(rs.WithForgottenRetention(retention))
			now := time.Unix(1_000_000, 0)
			m.SetClockForTest(func() time.Time { return now })
			tp := testTP(0)
			s := segment(tp, 0, 99, map[rs.LeaderEpoch]int64{0: 0})
			require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, s))
			for _, st := range []rs.RemoteLogSegmentState{rs.DeleteSegmentStarted, rs.DeleteSegmentFinished} {
				require.NoError(t, m.UpdateRemoteLogSegmentMetadata(ctx, update(s, st)))
			}
			now = now.Add(59 * time.Minute)
			require.ErrorIs(t, m.AddRemoteLogSegmentMetadata(ctx, s), rs.ErrInvalidAdd, "not expired yet")
			now = now.Add(1000 * time.Hour)
			err := m.AddRemoteLogSegmentMetadata(ctx, s)
			if retention == 0 {
				require.ErrorIs(t, err, rs.ErrInvalidAdd, "WithForgottenRetention(0): ids stay taken")
				require.Zero(t, m.PurgedSegments())
			} else {
				require.NoError(t, err, "expired: the id is free again")
				require.Equal(t, int64(1), m.PurgedSegments())
			}
		})
	}
}

// A cache behind a purge loads the partition again: a segment it held
// live, whose delete and purge it missed, does not stay.
func TestPurgeKeepsCachesHonest(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.NewDatabase(t)
	writer := newPurgeManager(t, dsn)
	cached := newPurgeManager(t, dsn, rs.WithCache(), rs.WithCachePollInterval(0))
	a, b := testTP(0), testTP(1)
	sa := segment(a, 0, 99, map[rs.LeaderEpoch]int64{0: 0})
	sb := segment(b, 0, 99, map[rs.LeaderEpoch]int64{0: 0})
	for _, s := range []rs.RemoteLogSegmentMetadata{sa, sb} {
		require.NoError(t, writer.AddRemoteLogSegmentMetadata(ctx, s))
		require.NoError(t, writer.UpdateRemoteLogSegmentMetadata(ctx, update(s, rs.CopySegmentFinished)))
	}
	require.NoError(t, cached.OnPartitionLeadershipChanges(ctx, []rs.TopicIDPartition{a, b}, nil))
	for _, tp := range []rs.TopicIDPartition{a, b} {
		waitLoaded(t, cached, tp)
		waitCaughtUp(t, cached, tp)
	}
	cached.DropNotifications(true)

	// While the cache hears nothing: a's segment is deleted, b's partition
	// too, and both are purged.
	for _, st := range []rs.RemoteLogSegmentState{rs.DeleteSegmentStarted, rs.DeleteSegmentFinished} {
		require.NoError(t, writer.UpdateRemoteLogSegmentMetadata(ctx, update(sa, st)))
	}
	for _, st := range []rs.RemotePartitionDeleteState{rs.DeletePartitionMarked, rs.DeletePartitionStarted, rs.DeletePartitionFinished} {
		require.NoError(t, writer.PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{TopicIDPartition: b, State: st}))
	}
	// a gets a new segment after the delete, so the change feed has rows
	// after the cache's version.
	sa2 := segment(a, 100, 199, map[rs.LeaderEpoch]int64{0: 100})
	require.NoError(t, writer.AddRemoteLogSegmentMetadata(ctx, sa2))
	n, err := writer.PurgeForgotten(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	// b's id back in b: adds work again.
	require.NoError(t, writer.AddRemoteLogSegmentMetadata(ctx, sb))

	for _, tp := range []rs.TopicIDPartition{a, b} {
		waitCaughtUp(t, cached, tp)
		want, err := writer.ListRemoteLogSegments(ctx, tp)
		require.NoError(t, err)
		got, err := cached.ListRemoteLogSegments(ctx, tp)
		require.NoError(t, err)
		require.Equal(t, want, got, tp.String())
		require.Len(t, got, 1)
	}
}

// A purge waits on nobody: rows whose partition a writer holds are skipped,
// and purged by the next purge once the writer is done.
func TestPurgeSkipsLockedRows(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.NewDatabase(t)
	m := newPurgeManager(t, dsn)
	held, free := testTP(0), testTP(1)
	for _, tp := range []rs.TopicIDPartition{held, free} {
		s := segment(tp, 0, 99, map[rs.LeaderEpoch]int64{0: 0})
		require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, s))
		for _, st := range []rs.RemoteLogSegmentState{rs.DeleteSegmentStarted, rs.DeleteSegmentFinished} {
			require.NoError(t, m.UpdateRemoteLogSegmentMetadata(ctx, update(s, st)))
		}
	}
	pool := newPool(t, dsn, 0, false)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(context.Background()) //nolint:errcheck // released below
	_, err = tx.Exec(ctx, "SELECT 1 FROM rlmm_partitions WHERE topic_id = $1 AND partition = $2 FOR UPDATE", held.TopicID, held.Partition)
	require.NoError(t, err)

	// With the lock held, the purge returns (it would wait for ever
	// otherwise: the context bounds only a failure of this test).
	purgeCtx, cancel := context.WithTimeout(ctx, testwait.Timeout(t))
	defer cancel()
	n, err := m.PurgeForgotten(purgeCtx, 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "the free partition's segment")
	require.NoError(t, tx.Rollback(ctx))
	n, err = m.PurgeForgotten(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "the held partition's segment, once released")
}

// A finished partition's delete record goes only with the purge, and only
// once its segments are gone: a raw clear is refused, and a purge that
// could not delete a segment (its row held by a writer) keeps the record.
func TestPurgeGuardKeepsDeleteRecordWhileSegmentsRemain(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.NewDatabase(t)
	m := newPurgeManager(t, dsn)
	tp := testTP(0)
	s := segment(tp, 0, 99, map[rs.LeaderEpoch]int64{0: 0})
	require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, s))
	for _, st := range []rs.RemotePartitionDeleteState{rs.DeletePartitionMarked, rs.DeletePartitionStarted, rs.DeletePartitionFinished} {
		require.NoError(t, m.PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{TopicIDPartition: tp, State: st}))
	}
	pool := newPool(t, dsn, 0, false)
	_, err := pool.Exec(ctx, `UPDATE rlmm_partitions SET delete_state = NULL, delete_broker_id = NULL, delete_event_timestamp_ms = NULL
		WHERE topic_id = $1 AND partition = $2`, tp.TopicID, tp.Partition)
	require.ErrorContains(t, err, "rlmm_set_partition_delete_state", "a raw clear")

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "SELECT 1 FROM rlmm_segments WHERE segment_id = $1 FOR UPDATE", s.SegmentID.ID)
	require.NoError(t, err)
	n, err := m.PurgeForgotten(ctx, 0)
	require.NoError(t, err)
	require.Zero(t, n, "the held segment stays")
	var state *int16
	require.NoError(t, pool.QueryRow(ctx, "SELECT delete_state FROM rlmm_partitions WHERE topic_id = $1 AND partition = $2", tp.TopicID, tp.Partition).Scan(&state))
	require.NotNil(t, state, "the delete record stays while a segment remains")
	require.EqualValues(t, rs.DeletePartitionFinished, *state)
	require.NoError(t, tx.Rollback(ctx))

	n, err = m.PurgeForgotten(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	require.Zero(t, countRows(t, pool, "rlmm_segments"))
	require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, segment(tp, 0, 99, map[rs.LeaderEpoch]int64{0: 0})), "adds work again")
}

// Purging forgotten segments moves no cache's generation (only
// rlmm_resync does), so caches catch up instead of reloading every
// partition after every purge.
func TestPurgeKeepsTheDataGeneration(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.NewDatabase(t)
	m := newPurgeManager(t, dsn)
	pool := newPool(t, dsn, 0, false)
	generation := func() (g int64) {
		require.NoError(t, pool.QueryRow(ctx, "SELECT generation FROM rlmm_data_generation").Scan(&g))
		return g
	}
	before := generation()
	s := segment(testTP(0), 0, 99, map[rs.LeaderEpoch]int64{0: 0})
	require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, s))
	for _, st := range []rs.RemoteLogSegmentState{rs.CopySegmentFinished, rs.DeleteSegmentStarted, rs.DeleteSegmentFinished} {
		require.NoError(t, m.UpdateRemoteLogSegmentMetadata(ctx, update(s, st)))
	}
	n, err := m.PurgeForgotten(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	require.Equal(t, before, generation(), "the data generation after a purge of segments")
}

// A purge that takes a deleted partition's record, and so its epoch ends,
// reloads that partition alone in another broker's cache: the data
// generation stays, another partition is not read again, and the purged
// partition's old epoch ends are gone from the cache.
func TestPurgeOfADeletedPartitionReloadsItAlone(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.NewDatabase(t)
	writer := newPurgeManager(t, dsn)
	cached := newPurgeManager(t, dsn, rs.WithCache(), rs.WithCachePollInterval(0))
	pool := newPool(t, dsn, 0, false)
	generation := func() (g int64) {
		require.NoError(t, pool.QueryRow(ctx, "SELECT generation FROM rlmm_data_generation").Scan(&g))
		return g
	}
	deleted, live := testTP(0), testTP(1)
	for _, tp := range []rs.TopicIDPartition{deleted, live} {
		s := segment(tp, 0, 99, map[rs.LeaderEpoch]int64{0: 0})
		require.NoError(t, writer.AddRemoteLogSegmentMetadata(ctx, s))
		require.NoError(t, writer.UpdateRemoteLogSegmentMetadata(ctx, update(s, rs.CopySegmentFinished)))
	}
	require.NoError(t, cached.OnPartitionLeadershipChanges(ctx, []rs.TopicIDPartition{deleted, live}, nil))
	for _, tp := range []rs.TopicIDPartition{deleted, live} {
		waitLoaded(t, cached, tp)
	}
	for _, st := range []rs.RemotePartitionDeleteState{rs.DeletePartitionMarked, rs.DeletePartitionStarted, rs.DeletePartitionFinished} {
		require.NoError(t, writer.PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{TopicIDPartition: deleted, State: st}))
	}
	for _, tp := range []rs.TopicIDPartition{deleted, live} {
		waitCaughtUp(t, cached, tp)
	}

	var mu sync.Mutex
	reloaded := map[rs.TopicIDPartition]int{}
	cached.AfterCatchUpRead(func(tp rs.TopicIDPartition, reload bool) {
		if reload {
			mu.Lock()
			reloaded[tp]++
			mu.Unlock()
		}
	})
	before := generation()
	n, err := writer.PurgeForgotten(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	require.Equal(t, before, generation(), "the data generation after the purge of a deleted partition")

	// Adds work again; an end below the purged one's shows the old end is
	// gone.
	again := segment(deleted, 0, 49, map[rs.LeaderEpoch]int64{0: 0})
	require.NoError(t, writer.AddRemoteLogSegmentMetadata(ctx, again))
	require.NoError(t, writer.UpdateRemoteLogSegmentMetadata(ctx, update(again, rs.CopySegmentFinished)))
	for _, tp := range []rs.TopicIDPartition{deleted, live} {
		waitCaughtUp(t, cached, tp)
	}
	end, found, err := cached.EpochEndOffset(ctx, deleted, 0)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, int64(49), end, "the purged partition's old epoch end is still cached")
	list, err := cached.ListRemoteLogSegments(ctx, deleted)
	require.NoError(t, err)
	require.Len(t, list, 1)
	mu.Lock()
	defer mu.Unlock()
	require.Zero(t, reloaded[live], "the purge made the cache reload a partition it did not touch")
}

// LastPurge is the zero time until a purge succeeds, then the time of the
// last one that did; a failed purge leaves it as it was.
func TestLastPurge(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	m := newPurgeManager(t, pgtest.NewDatabase(t))
	require.True(t, m.LastPurge().IsZero(), "no purge yet")

	before := time.Now()
	_, err := m.PurgeForgotten(ctx, 0)
	require.NoError(t, err)
	first := m.LastPurge()
	require.False(t, first.Before(before), "the purge's end is after its start")
	require.False(t, first.After(time.Now()))

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = m.PurgeForgotten(canceled, 0)
	require.ErrorIs(t, err, rs.ErrIO)
	require.Equal(t, first, m.LastPurge(), "a failed purge does not count")
}
