package remotestorage_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/logtest"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/testwait"
	"github.com/krabka/remotestorage/rlmmtest"
)

// A write through a cached manager is in its own cache before the call
// returns, and queries on a loaded partition make no round trip; CaughtUp
// makes one.
func TestCacheReadsYourWritesWithoutRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, counter := newCountingPool(t, pgtest.NewDatabase(t))
	m, err := rs.NewPgManager(ctx, pool, rs.WithCache())
	require.NoError(t, err)
	t.Cleanup(m.Close)
	signals := m.TestSignals()
	signals.Init()
	// Once listening, nothing makes the cache read in the background but
	// other brokers' writes, and there are none here.
	signals.Listening.WaitUntil(t, "the listener listens", m.Listening)
	tp := testTP(0)
	require.NoError(t, m.OnPartitionLeadershipChanges(ctx, []rs.TopicIDPartition{tp}, nil))
	waitLoaded(t, m, tp)

	s := segment(tp, 0, 99, map[rs.LeaderEpoch]int64{0: 0, 1: 50})
	require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, s))
	require.NoError(t, m.UpdateRemoteLogSegmentMetadata(ctx, update(s, rs.CopySegmentFinished)))
	waitCaughtUp(t, m, tp)

	counter.Take()
	got, ok, err := m.RemoteLogSegmentMetadata(ctx, tp, 1, 60)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, s.SegmentID, got.SegmentID)
	require.Equal(t, rs.CopySegmentFinished, got.State)
	highest, ok, err := m.HighestOffsetForEpoch(ctx, tp, 0)
	require.NoError(t, err)
	require.True(t, ok)
	require.EqualValues(t, 99, highest)
	list, err := m.ListRemoteLogSegments(ctx, tp)
	require.NoError(t, err)
	require.Len(t, list, 1)
	trips, queries := counter.Take()
	require.Zero(t, trips, "cached queries went to the database: %v", queries)

	ok, err = m.CaughtUp(ctx, tp)
	require.NoError(t, err)
	require.True(t, ok)
	trips, _ = counter.Take()
	require.EqualValues(t, 1, trips, "CaughtUp on a cached partition is one round trip")
}

// Broker A writes; broker B caches. Whenever B says it is caught up, its
// answers equal the model's.
func TestCacheCrossBroker(t *testing.T) {
	t.Parallel()
	testCacheCrossBroker(t, pgtest.NewDatabase(t))
}

func testCacheCrossBroker(t *testing.T, dsn string, opts ...rs.Option) {
	ctx := t.Context()
	poolA := newPool(t, dsn, 0, false)
	a, err := rs.NewPgManager(ctx, poolA)
	require.NoError(t, err)
	b := newCachedManager(t, dsn, opts...)
	model := rlmmtest.NewModel(rs.DefaultMaxCustomMetadataBytes)

	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	topicID := uuid.New()
	tps := []rs.TopicIDPartition{{TopicID: topicID, Topic: "cross", Partition: 0}, {TopicID: topicID, Topic: "cross", Partition: 1}}
	require.NoError(t, b.OnPartitionLeadershipChanges(ctx, tps[:1], tps[1:]))
	for _, tp := range tps {
		waitLoaded(t, b, tp) // a loading partition answers ErrNotReady, which waitCaughtUp refuses
	}
	var ids []rs.RemoteLogSegmentID
	for step := range 400 {
		tp := tps[rng.IntN(len(tps))]
		var errA, errModel error
		switch r := rng.IntN(100); {
		case r < 45 || len(ids) == 0:
			start := rng.Int64N(300)
			end := start + rng.Int64N(40)
			epochs := map[rs.LeaderEpoch]int64{rs.LeaderEpoch(rng.IntN(3)): start}
			if end > start && rng.IntN(4) == 0 {
				epochs[3] = start + 1 + rng.Int64N(end-start)
			}
			s := segment(tp, start, end, epochs)
			s.TxnIndexEmpty = rng.IntN(3) > 0
			errA = a.AddRemoteLogSegmentMetadata(ctx, s)
			errModel = model.AddRemoteLogSegmentMetadata(ctx, s)
			ids = append(ids, s.SegmentID)
		case r < 97:
			u := rs.RemoteLogSegmentMetadataUpdate{SegmentID: ids[rng.IntN(len(ids))], State: rs.RemoteLogSegmentState(1 + rng.IntN(3)), BrokerID: int32(step)}
			if rng.IntN(3) == 0 {
				u.CustomMetadata = []byte(fmt.Sprint(step))
			}
			errA = a.UpdateRemoteLogSegmentMetadata(ctx, u)
			errModel = model.UpdateRemoteLogSegmentMetadata(ctx, u)
		default:
			d := rs.RemotePartitionDeleteMetadata{TopicIDPartition: tp, State: rs.RemotePartitionDeleteState(rng.IntN(3))}
			errA = a.PutRemotePartitionDeleteMetadata(ctx, d)
			errModel = model.PutRemotePartitionDeleteMetadata(ctx, d)
		}
		require.Equal(t, errModel == nil, errA == nil, "step %d (seed %d): model %v, store %v", step, seed, errModel, errA)
		if step%10 != 9 {
			continue
		}
		for _, tp := range tps {
			waitCaughtUp(t, b, tp)
			requireSameAnswers(t, fmt.Sprintf("step %d seed %d", step, seed), model, b, tp)
		}
	}
}

// A lost notification never leaves the cache stale for good: CaughtUp
// compares versions, says false, and has the cache catch up.
func TestCacheMissedNotification(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.NewDatabase(t)
	a := newCachedManager(t, dsn)                              // a writer that caches nothing
	b := newCachedManager(t, dsn, rs.WithCachePollInterval(0)) // no poll: only CaughtUp can tell
	tp := testTP(0)
	// The one catch-up that may still run on its own: the one the
	// listener's first connection asks for, which a busy machine can
	// delay past the write.
	var catchUps atomic.Int64
	b.BeforeCatchUp(func(rs.TopicIDPartition, bool) { catchUps.Add(1) })
	require.NoError(t, b.OnPartitionLeadershipChanges(ctx, nil, []rs.TopicIDPartition{tp}))
	waitLoaded(t, b, tp)
	b.DropNotifications(true)

	before := catchUps.Load()
	s := writeFinished(t, a, tp, 0, 99)
	ok, err := b.CaughtUp(ctx, tp)
	require.NoError(t, err)
	if ok {
		// Honest only if a catch-up began after the write and brought it.
		require.Greater(t, catchUps.Load(), before, "no notification reached b and no catch-up ran since the write, yet CaughtUp said true")
		got, found, err := b.RemoteLogSegmentMetadata(ctx, tp, 0, 50)
		require.NoError(t, err)
		require.True(t, found && got.State == rs.CopySegmentFinished, "CaughtUp said true before b's cache held the write")
	}
	waitCaughtUp(t, b, tp)
	got, found, err := b.RemoteLogSegmentMetadata(ctx, tp, 0, 50)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, s.SegmentID, got.SegmentID)
}

// A writer whose notification never went out (it died between its commit
// and its notification; here b drops every notification) leaves another
// cache behind for one poll interval at most, with nobody calling CaughtUp.
func TestCachePollBoundsALostNotification(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.NewDatabase(t)
	a := newCachedManager(t, dsn)
	const interval = 50 * time.Millisecond
	b := newCachedManager(t, dsn, rs.WithCachePollInterval(interval))
	tp := testTP(0)
	require.NoError(t, b.OnPartitionLeadershipChanges(ctx, nil, []rs.TopicIDPartition{tp}))
	waitLoaded(t, b, tp)
	b.DropNotifications(true)

	writeFinished(t, a, tp, 0, 99)
	// The bound is one interval plus a catch-up; the timeout only keeps a
	// broken poll from hanging the test.
	caughtUp(b).WaitUntil(t, "the poll brought b's cache to the write", func() bool {
		got, found, err := b.RemoteLogSegmentMetadata(ctx, tp, 0, 50)
		return err == nil && found && got.State == rs.CopySegmentFinished
	})
	got, found, err := b.RemoteLogSegmentMetadata(ctx, tp, 0, 50)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, rs.CopySegmentFinished, got.State)
}

// When the listener's connection drops, the cache keeps answering, CaughtUp
// stays honest, and the cache catches up once the connection is back.
func TestCacheListenerConnectionDropped(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.NewDatabase(t)
	admin := newPool(t, dsn, 0, false)
	a := newCachedManager(t, dsn)
	b := newCachedManager(t, dsn)
	tp := testTP(0)
	require.NoError(t, b.OnPartitionLeadershipChanges(ctx, []rs.TopicIDPartition{tp}, nil))
	waitLoaded(t, b, tp)
	first := writeFinished(t, a, tp, 0, 99)
	waitCaughtUp(t, b, tp)

	// Kill b's listener (the only backend of this database listening).
	signals := b.TestSignals()
	signals.Init()
	signals.Listening.WaitUntil(t, "b's listener listens", b.Listening)
	connections := b.ListenerConnections()
	var killed int
	testwait.Until(t, "the listener's backend is killed", func() bool {
		require.NoError(t, admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND query = 'LISTEN rlmm_changes' AND pid <> pg_backend_pid()`).Scan(&killed))
		return killed > 0
	})
	second := writeFinished(t, a, tp, 100, 199)

	// Until it catches up, b answers from its cache, and says true only if
	// the answer holds the write.
	list, err := b.ListRemoteLogSegments(ctx, tp)
	require.NoError(t, err)
	require.NotEmpty(t, list)
	if ok, err := b.CaughtUp(ctx, tp); err == nil && ok {
		_, found, err := b.RemoteLogSegmentMetadata(ctx, tp, 0, 150)
		require.NoError(t, err)
		require.True(t, found, "CaughtUp said true without the write")
	}
	signals.Listening.WaitUntil(t, "the listener reconnects", func() bool { return b.ListenerConnections() > connections })
	waitCaughtUp(t, b, tp)
	for _, s := range []rs.RemoteLogSegmentMetadata{first, second} {
		got, found, err := b.RemoteLogSegmentMetadata(ctx, tp, 0, s.StartOffset)
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, s.SegmentID, got.SegmentID)
	}
}

// The listener logs a state change, not each failed attempt: one warning
// when it cannot listen, however many attempts fail, and one record when it
// listens again.
func TestCacheListenerLogsStateChanges(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	cfg, err := pgx.ParseConfig(dsn)
	require.NoError(t, err)
	var refuse atomic.Bool
	var attempts atomic.Int64
	refuse.Store(true)
	dial := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if refuse.Load() {
			attempts.Add(1)
			return nil, errors.New("refused by the test")
		}
		return dial(ctx, network, addr)
	}
	logger, logs := logtest.New(slog.LevelInfo)
	m := newCachedManager(t, dsn, rs.WithListenerConnConfig(cfg), rs.WithLogger(logger))
	listenerRecords := func() (warnings, infos int) {
		for _, r := range logs.Records(t) {
			if msg, _ := r["msg"].(string); strings.Contains(msg, "listener") {
				switch r["level"] {
				case "WARN":
					warnings++
				case "INFO":
					infos++
				}
			}
		}
		return warnings, infos
	}
	testwait.Until(t, "four failed attempts", func() bool { return attempts.Load() >= 4 })
	warnings, infos := listenerRecords()
	require.Equal(t, 1, warnings, "one warning for the outage")
	require.Zero(t, infos)

	signals := m.TestSignals()
	signals.Init()
	refuse.Store(false)
	signals.Listening.WaitOrTimeout(t)
	testwait.Until(t, "the recovery logged", func() bool { _, infos := listenerRecords(); return infos == 1 })
	warnings, _ = listenerRecords()
	require.Equal(t, 1, warnings)
}

// A partition still loading answers ErrNotReady; a partition not consumed
// is answered by the database and is never caught up; assigning twice does
// not reload; stopping drops the partition.
func TestCacheAssignment(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.NewDatabase(t)
	a := newCachedManager(t, dsn)
	b := newCachedManager(t, dsn)
	tp := testTP(0)
	s := writeFinished(t, a, tp, 0, 99)

	gate := make(chan struct{})
	var loads atomic.Int32
	b.BeforeCatchUp(func(_ rs.TopicIDPartition, loaded bool) {
		if !loaded {
			loads.Add(1)
			<-gate
		}
	})

	// Not consumed: the database answers, CaughtUp is false.
	got, found, err := b.RemoteLogSegmentMetadata(ctx, tp, 0, 10)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, s.SegmentID, got.SegmentID)
	ok, err := b.CaughtUp(ctx, tp)
	require.NoError(t, err)
	require.False(t, ok)

	require.NoError(t, b.OnPartitionLeadershipChanges(ctx, []rs.TopicIDPartition{tp}, nil))
	_, _, err = b.RemoteLogSegmentMetadata(ctx, tp, 0, 10)
	require.ErrorIs(t, err, rs.ErrNotReady)
	_, err = b.ListRemoteLogSegments(ctx, tp)
	require.ErrorIs(t, err, rs.ErrNotReady)
	_, err = b.CaughtUp(ctx, tp)
	require.ErrorIs(t, err, rs.ErrNotReady)
	close(gate)
	waitLoaded(t, b, tp)
	waitCaughtUp(t, b, tp)
	got, found, err = b.RemoteLogSegmentMetadata(ctx, tp, 0, 10)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, s.SegmentID, got.SegmentID)

	// Kafka may announce a partition again (leader, then follower).
	require.NoError(t, b.OnPartitionLeadershipChanges(ctx, nil, []rs.TopicIDPartition{tp}))
	ok, err = b.CaughtUp(ctx, tp)
	require.NoError(t, err)
	require.True(t, ok, "a partition assigned twice is not reloaded")
	require.EqualValues(t, 1, loads.Load())

	require.NoError(t, b.OnStopPartitions(ctx, []rs.TopicIDPartition{tp}))
	ok, err = b.CaughtUp(ctx, tp)
	require.NoError(t, err)
	require.False(t, ok, "a stopped partition is not consumed")
	require.NoError(t, b.OnPartitionLeadershipChanges(ctx, []rs.TopicIDPartition{tp}, nil))
	waitLoaded(t, b, tp)
	waitCaughtUp(t, b, tp)
	require.EqualValues(t, 2, loads.Load(), "a partition assigned again after a stop loads again")
}

// Writes made while the partition loads are in the cache once it is loaded.
func TestCacheWriteWhileLoading(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := newCachedManager(t, pgtest.NewDatabase(t))
	tp := testTP(0)
	gate := make(chan struct{})
	b.BeforeCatchUp(func(_ rs.TopicIDPartition, loaded bool) {
		if !loaded {
			<-gate
		}
	})
	require.NoError(t, b.OnPartitionLeadershipChanges(ctx, []rs.TopicIDPartition{tp}, nil))
	s := writeFinished(t, b, tp, 0, 99)
	close(gate)
	waitLoaded(t, b, tp)
	got, found, err := b.RemoteLogSegmentMetadata(ctx, tp, 0, 10)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, s.SegmentID, got.SegmentID)
	waitCaughtUp(t, b, tp)
}

// TestCacheEpochEndsOfSegmentsItNeverHeld: no write stores an epoch's end,
// so a cache takes them from the segments it is given. One that loads a
// partition after the segment that ends an epoch was forgotten (its rows
// still stored) and after another was purged (its end kept in
// rlmm_epoch_ends), and one that catches up on a finish written by another
// broker, answer EpochEndOffset as the database does.
func TestCacheEpochEndsOfSegmentsItNeverHeld(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.NewDatabase(t)
	a := newCachedManager(t, dsn) // the writer, caching nothing: the database's answers
	tp := testTP(0)
	purged := segment(tp, 0, 99, map[rs.LeaderEpoch]int64{0: 0, 1: 50})
	forgotten := segment(tp, 100, 199, map[rs.LeaderEpoch]int64{1: 100, 2: 150})
	for _, s := range []rs.RemoteLogSegmentMetadata{purged, forgotten} {
		require.NoError(t, a.AddRemoteLogSegmentMetadata(ctx, s))
		for _, st := range []rs.RemoteLogSegmentState{rs.CopySegmentFinished, rs.DeleteSegmentStarted, rs.DeleteSegmentFinished} {
			require.NoError(t, a.UpdateRemoteLogSegmentMetadata(ctx, update(s, st)))
		}
		if s.SegmentID == purged.SegmentID {
			n, err := a.PurgeForgotten(ctx, 0)
			require.NoError(t, err)
			require.Equal(t, int64(1), n)
		}
	}
	finish := func(start, end int64) {
		t.Helper()
		s := segment(tp, start, end, map[rs.LeaderEpoch]int64{2: start})
		require.NoError(t, a.AddRemoteLogSegmentMetadata(ctx, s))
		require.NoError(t, a.UpdateRemoteLogSegmentMetadata(ctx, update(s, rs.CopySegmentFinished)))
	}
	finish(200, 299)
	// Epoch 0's end only the purged segment gave, epoch 1's only the
	// forgotten one.
	want := map[rs.LeaderEpoch]int64{0: 49, 1: 149, 2: 299}

	b := newCachedManager(t, dsn)
	require.NoError(t, b.OnPartitionLeadershipChanges(ctx, nil, []rs.TopicIDPartition{tp}))
	waitLoaded(t, b, tp)
	waitCaughtUp(t, b, tp)
	requireEnds := func(m *rs.PgManager, want map[rs.LeaderEpoch]int64) {
		t.Helper()
		for e := rs.LeaderEpoch(0); e < 4; e++ {
			end, ok, err := m.EpochEndOffset(ctx, tp, e)
			require.NoError(t, err)
			w, wantOK := want[e]
			require.Equal(t, [2]any{w, wantOK}, [2]any{end, ok}, "EpochEndOffset(%d)", e)
		}
	}
	requireEnds(a, want)
	requireEnds(b, want)

	// A finish by a, which b learns by catching up.
	finish(300, 399)
	want[2] = 399
	waitCaughtUp(t, b, tp)
	requireEnds(a, want)
	requireEnds(b, want)
}
