package reliability_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgcluster"
	"github.com/krabka/remotestorage/internal/testwait"
)

// Connection faults, each its own test. For each: the calls fail with ErrIO
// or the caller's context error and nothing else, nothing panics, no
// goroutine is left behind (noLeaks), the same managers write again once
// the database is back, connection attempts during the outage stay bounded,
// and verify accounts for every write. How long the managers took to write
// again is logged, not asserted: a busy machine (the race detector, other
// jobs) stretches it. Quiet-machine figures are in docs/RELIABILITY.md.

// faultWorkload runs the standard workload on four brokers (two writers
// each) over dsn.
func faultWorkload(t *testing.T, dsn string, maxConns int32) (*workload, []*broker) {
	t.Helper()
	bs := brokers(t, dsn, 4, brokerConfig{maxConns: maxConns})
	parts := []rs.TopicIDPartition{newTP("faults", 0), newTP("faults", 1), newTP("faults", 2), newTP("faults", 3)}
	w := newWorkload(bs, parts, 8)
	w.pace = 2 * time.Millisecond
	w.start()
	t.Cleanup(func() {
		if !w.stopped() {
			w.finish()
		}
	})
	return w, bs
}

// finishAndVerify lets the workload run a little longer, stops it, and
// checks every write.
func finishAndVerify(t *testing.T, name, dsn string, w *workload) report {
	t.Helper()
	w.waitAcked(t, 100)
	w.finish()
	requireWorkloadErrors(t, w)
	r := verify(t, dsn, w)
	requireAccounted(t, r)
	t.Logf("%s: %s", name, r)
	return r
}

// TestFaultTerminateStorm kills every connection to the database
// (pg_terminate_backend) every 20 ms for two seconds.
func TestFaultTerminateStorm(t *testing.T) {
	dsn := sharedDatabase(t)
	w, bs := faultWorkload(t, dsn, 2)
	w.waitAcked(t, 200)

	ctx := t.Context()
	admin, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer admin.Close(context.Background())
	dialsBefore, failedBefore := totalDials(bs), w.failed.Load()
	var killed, rounds int64
	for start := time.Now(); time.Since(start) < 2*time.Second; {
		var n int64
		require.NoError(t, admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`).Scan(&n))
		killed += n
		rounds++
		time.Sleep(20 * time.Millisecond)
	}
	w.markBack()
	dials := totalDials(bs) - dialsBefore
	recovered := w.waitRecovered(t)
	t.Logf("terminate storm: %d rounds killed %d connections; %d calls failed meanwhile; %d connection attempts; every broker writing again %v after",
		rounds, killed, w.failed.Load()-failedBefore, dials, recovered.Round(time.Millisecond))
	require.Positive(t, w.failed.Load()-failedBefore, "the storm failed no call")
	// The server is up: every attempt succeeds, so each one replaces a
	// killed connection (or sends a cancel request for a call it broke).
	require.LessOrEqual(t, dials, 2*killed+int64(len(bs))*4)
	finishAndVerify(t, "terminate storm", dsn, w)
}

// TestFaultServerRestart stops the server (pg_ctl stop -m fast: sessions get
// FATAL 57P01), keeps it down for a second, and starts it again.
func TestFaultServerRestart(t *testing.T) {
	c, dsn := ownCluster(t, pgcluster.Options{})
	w, bs := faultWorkload(t, dsn, 2)
	w.waitAcked(t, 200)

	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(t))
	defer cancel()
	dialsBefore := totalDials(bs)
	stopped := time.Now()
	require.NoError(t, c.Shutdown(ctx, pgcluster.Fast))
	time.Sleep(time.Second) // the outage
	require.NoError(t, c.Startup(ctx))
	w.markBack()
	down := time.Since(stopped)
	dials := totalDials(bs) - dialsBefore
	recovered := w.waitRecovered(t)
	t.Logf("restart: down %v, %d connection attempts meanwhile, every broker writing again %v after", down.Round(time.Millisecond), dials, recovered.Round(time.Millisecond))
	require.LessOrEqual(t, dials, dialBound(len(bs), 2, down))
	finishAndVerify(t, "restart", dsn, w)
}

// TestFaultServerUnreachable takes the network path to the server away for
// 10 s (a proxy that resets every connection), with brokers set up by
// ConfigurePool and, for comparison, one plain pgxpool broker whose two
// writers retry every 20 ms.
func TestFaultServerUnreachable(t *testing.T) {
	dsn := sharedDatabase(t)
	p, proxied := startProxy(t, dsn)
	w, bs := faultWorkload(t, proxied, 2)
	plain := brokers(t, proxied, 1, brokerConfig{maxConns: 2, plain: true})
	plainLoad := newWorkload(plain, []rs.TopicIDPartition{newTP("plain", 0)}, 2)
	plainLoad.start()
	defer func() {
		if !plainLoad.stopped() {
			plainLoad.finish()
		}
	}()
	w.waitAcked(t, 200)

	const outage = 10 * time.Second
	dialsBefore, plainBefore, offeredBefore := totalDials(bs), totalDials(plain), p.offered.Load()
	p.setDown(true)
	time.Sleep(outage)
	dials, plainDials, offered := totalDials(bs)-dialsBefore, totalDials(plain)-plainBefore, p.offered.Load()-offeredBefore
	p.setDown(false)
	w.markBack()
	recovered := w.waitRecovered(t)
	t.Logf("unreachable %v: %d connection attempts from %d ConfigurePool brokers (%d reached the proxy), %d from one plain pgxpool broker; every broker writing again %v after",
		outage, dials, len(bs), offered, plainDials, recovered.Round(time.Millisecond))
	require.LessOrEqual(t, dials, dialBound(len(bs), 2, outage))
	require.Greater(t, plainDials, dials/int64(len(bs)), "the plain pool should dial more than a ConfigurePool one: is the counter counting?")
	plainLoad.finish()
	requireWorkloadErrors(t, plainLoad)
	finishAndVerify(t, "unreachable", dsn, w)
}

// TestFaultPoolExhaustion gives 16 callers a pool of 2 connections, first
// with both connections held elsewhere (every call must give up at its
// deadline, having sent nothing), then shared (calls queue; those that time
// out must be all-or-nothing).
func TestFaultPoolExhaustion(t *testing.T) {
	dsn := sharedDatabase(t)
	b := newBroker(t, dsn, brokerConfig{maxConns: 2})
	tp := newTP("exhaustion", 0)
	ctx := t.Context()

	var held []*pgxpool.Conn
	for range 2 {
		c, err := b.pool.Acquire(ctx)
		require.NoError(t, err)
		held = append(held, c)
	}
	const callers = 16
	const deadline = 200 * time.Millisecond
	var wg sync.WaitGroup
	var slowest atomic.Int64
	errs := make([]error, callers)
	for i := range callers {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, deadline)
			defer cancel()
			start := time.Now()
			errs[i] = b.m.AddRemoteLogSegmentMetadata(cctx, segmentOf(tp, int64(i)))
			d := int64(time.Since(start))
			for old := slowest.Load(); d > old && !slowest.CompareAndSwap(old, d); old = slowest.Load() {
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.ErrorIs(t, err, rs.ErrIO)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.False(t, rs.OutcomeUnknown(err), "waiting for a connection sends nothing: %v", err)
	}
	require.Less(t, time.Duration(slowest.Load()), deadline+testwait.Timeout(t)/2, "a call waited far past its deadline")
	qctx, cancel := context.WithTimeout(ctx, deadline)
	_, err := b.m.ListRemoteLogSegments(qctx, tp)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "the pool is still exhausted: a query must time out too")
	require.ErrorIs(t, err, rs.ErrIO)
	for _, c := range held {
		c.Release()
	}
	released := time.Now()
	list, err := b.m.ListRemoteLogSegments(ctx, tp)
	require.NoError(t, err)
	require.Empty(t, list, "calls that timed out waiting for a connection stored something")
	require.NoError(t, b.m.AddRemoteLogSegmentMetadata(ctx, segmentOf(tp, 100)))
	recovered := time.Since(released)

	// Shared: 16 callers, 20 calls each, 30 ms deadlines, on 2 connections.
	w := newWorkload([]*broker{b}, []rs.TopicIDPartition{newTP("exhaustion", 1), newTP("exhaustion", 2)}, callers)
	w.opTimeout = 30 * time.Millisecond
	w.start()
	w.waitAcked(t, 300)
	w.markBack()
	w.finish()
	requireWorkloadErrors(t, w)
	r := verify(t, dsn, w)
	requireAccounted(t, r)
	t.Logf("pool exhaustion: all %d callers gave up at their %v deadline with nothing sent (slowest %v); writing again %v after the connections were released; shared: %s",
		callers, deadline, time.Duration(slowest.Load()).Round(time.Millisecond), recovered.Round(time.Millisecond), r)
}

// TestFaultRowLock: someone else's transaction holds the lock on a
// partition's row, which every write to the partition takes. Writes give up
// at their deadline, and the manager asks the server to cancel them, so
// none of them runs on behind the lock and applies later; on a plain
// pgxpool too, whose own context watcher would only close the socket and
// leave the statement waiting. Their outcome is reported unknown
// (OutcomeUnknown): a statement may commit before the cancel reaches it.
// Queries do not wait for the lock at all.
func TestFaultRowLock(t *testing.T) {
	dsn := sharedDatabase(t)
	// One connection more than the statements that block on the lock (the
	// writers and the update below), so that the query tests the lock, not
	// the pool: with 4, the query sometimes waited for a writer's connection
	// until its own deadline.
	const writers = 4
	b := newBroker(t, dsn, brokerConfig{maxConns: writers + 2})
	plain := newBroker(t, dsn, brokerConfig{maxConns: 2, plain: true})
	tp := newTP("rowlock", 0)
	ctx := t.Context()
	first := segmentOf(tp, 0)
	require.NoError(t, b.m.AddRemoteLogSegmentMetadata(ctx, first))

	admin, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer admin.Close(context.Background())
	waiting := func() int {
		var n int
		require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n))
		return n
	}
	holder, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer holder.Close(context.Background())
	tx, err := holder.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "SELECT 1 FROM rlmm_partitions WHERE topic_id = $1 AND partition = $2 FOR UPDATE", tp.TopicID, tp.Partition)
	require.NoError(t, err)

	const deadline = 300 * time.Millisecond
	var wg sync.WaitGroup
	errs := make([]error, writers+1)
	var slowest atomic.Int64
	for i := range writers + 1 {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, deadline)
			defer cancel()
			start := time.Now()
			if i == writers {
				errs[i] = b.m.UpdateRemoteLogSegmentMetadata(cctx, rs.RemoteLogSegmentMetadataUpdate{SegmentID: first.SegmentID, State: rs.CopySegmentFinished, BrokerID: 1})
			} else {
				errs[i] = b.m.AddRemoteLogSegmentMetadata(cctx, segmentOf(tp, int64(1+i)))
			}
			d := int64(time.Since(start))
			for old := slowest.Load(); d > old && !slowest.CompareAndSwap(old, d); old = slowest.Load() {
			}
		})
	}
	// Queries read a snapshot: the lock, held until long after, does not
	// stop them. (Not timed: a saturated machine took more than the
	// writers' deadline for it.)
	qctx, cancel := context.WithTimeout(ctx, testwait.Timeout(t))
	list, err := b.m.ListRemoteLogSegments(qctx, tp)
	cancel()
	require.NoError(t, err)
	require.Len(t, list, 1)
	wg.Wait()
	unknown := 0
	for _, err := range errs {
		require.ErrorIs(t, err, rs.ErrIO)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		if rs.OutcomeUnknown(err) {
			unknown++
		}
	}
	require.Less(t, time.Duration(slowest.Load()), deadline+testwait.Timeout(t)/2)
	testwait.Until(t, "the cancelled statements stop waiting for the lock", func() bool { return waiting() == 0 })

	// The plain pool's statement is cancelled on the server too, and the
	// pool keeps its connection.
	ghost := segmentOf(tp, 50)
	plainConns := plain.pool.Stat().NewConnsCount()
	cctx, cancel := context.WithTimeout(ctx, deadline)
	ghostErr := plain.m.AddRemoteLogSegmentMetadata(cctx, ghost)
	cancel()
	require.ErrorIs(t, ghostErr, rs.ErrIO)
	require.ErrorIs(t, ghostErr, context.DeadlineExceeded)
	require.True(t, rs.OutcomeUnknown(ghostErr), "the statement was sent and may still commit: %v", ghostErr)
	testwait.Until(t, "the plain pool's cancelled statement stops waiting for the lock", func() bool { return waiting() == 0 })

	require.NoError(t, tx.Rollback(ctx))
	released := time.Now()
	require.NoError(t, b.m.AddRemoteLogSegmentMetadata(ctx, segmentOf(tp, 100)))
	recovered := time.Since(released)
	testwait.Until(t, "the plain pool's connection is back", func() bool { return plain.pool.Stat().AcquiredConns() == 0 })
	require.NoError(t, plain.m.AddRemoteLogSegmentMetadata(ctx, segmentOf(tp, 60)), "the plain pool's next write")
	require.Equal(t, plainConns, plain.pool.Stat().NewConnsCount(), "the plain pool lost its connection to the deadline")

	// Reading back resolves every failed write: none applied.
	list, err = b.m.ListRemoteLogSegments(ctx, tp)
	require.NoError(t, err)
	require.Len(t, list, 3, "a cancelled write applied") // the first segment and the two added after
	require.False(t, slices.ContainsFunc(list, func(s rs.RemoteLogSegmentMetadata) bool { return s.SegmentID == ghost.SegmentID }), "the plain pool's cancelled add applied")
	require.Equal(t, rs.CopySegmentStarted, list[0].State, "the cancelled update applied")
	t.Logf("row lock: %d writes gave up at their %v deadline (slowest %v), %d of them reported as ambiguous, none applied, nor the plain pool's; writing again %v after",
		len(errs), deadline, time.Duration(slowest.Load()).Round(time.Millisecond), unknown, recovered.Round(time.Millisecond))
}
