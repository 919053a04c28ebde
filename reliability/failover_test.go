package reliability_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgcluster"
	"github.com/krabka/remotestorage/internal/testwait"
)

// Primary failover, as docs/RUNBOOK.md describes it: a primary and a hot
// standby from the local server binaries, brokers on remotestorage.NewPool
// over a multi-host DSN with target_session_attrs=read-write, write load
// from several brokers, the primary killed (pg_ctl stop -m immediate) and
// the standby promoted. docs/RELIABILITY.md reports the figures these log.
//
// With synchronous replication no acknowledged write is lost, and caches
// stay honest. With asynchronous replication the test cuts the standby off
// before the failover and measures what is lost: every write acknowledged
// meanwhile. A cache that held the lost writes may then say CaughtUp while
// it differs from the database (logged, not asserted: the runbook says to restart the
// brokers' caches after an asynchronous failover).

func TestFailoverSynchronous(t *testing.T) { failover(t, true) }

func TestFailoverAsynchronous(t *testing.T) { failover(t, false) }

const (
	failoverBrokers       = 4
	failoverPartitions    = 2 // per broker, written by it alone
	failoverAcksBefore    = 200
	failoverAcksPerBroker = 25 // after the promotion
)

// segmentRecord is what a broker knows about a segment it wrote.
type segmentRecord struct {
	seg rs.RemoteLogSegmentMetadata
	// The state whose write was acknowledged; -1: the add was not.
	acked rs.RemoteLogSegmentState
	// The last write's outcome is unknown (ambiguous) or was refused
	// cleanly (OutcomeUnknown false: nothing applied).
	ambiguous, refused bool
	// The write was acknowledged after the promotion returned.
	afterPromotion bool
}

type failoverBroker struct {
	m   *rs.PgManager
	tps []rs.TopicIDPartition

	mu   sync.Mutex
	segs []*segmentRecord
	// firstAckAfter is when the first write acknowledged after the
	// promotion returned.
	firstAckAfter time.Time
	acksAfter     int
}

func failover(t *testing.T, synchronous bool) {
	noLeaks(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*testwait.Timeout(t))
	defer cancel()

	// wal_log_hints and WAL kept since the fork let pg_rewind fence the old
	// primary afterwards.
	conf := map[string]string{"wal_log_hints": "on", "wal_keep_size": "256MB", "cluster_name": "node1", "synchronous_commit": "on"}
	primary, err := pgcluster.Start(ctx, pgcluster.Options{TCP: true, ExtraConf: conf})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, primary.Stop()) })
	standby, err := pgcluster.StartStandby(ctx, primary, pgcluster.Options{TCP: true,
		ExtraConf: map[string]string{"wal_log_hints": "on", "wal_keep_size": "256MB", "cluster_name": "node2", "synchronous_commit": "on"}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, standby.Stop()) })
	var cut *proxy // async: the standby streams through it, so the test can cut it off
	if synchronous {
		requireSyncStandby(t, ctx, primary, "node2")
	} else {
		cut = streamThroughProxy(t, ctx, primary, standby)
	}
	dsn := fmt.Sprintf("postgres://postgres@%s,%s/postgres?target_session_attrs=read-write&sslmode=disable&connect_timeout=2",
		primary.TCPAddr(), standby.TCPAddr())
	{
		pool, err := rs.NewPool(ctx, dsn)
		require.NoError(t, err)
		require.NoError(t, rs.Migrate(ctx, pool))
		pool.Close()
	}

	topicID := uuid.New()
	var all []rs.TopicIDPartition
	bs := make([]*failoverBroker, failoverBrokers)
	for i := range bs {
		pool, err := rs.NewPool(ctx, dsn)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		m, err := rs.NewPgManager(ctx, pool)
		require.NoError(t, err)
		t.Cleanup(m.Close)
		bs[i] = &failoverBroker{m: m}
		for p := range failoverPartitions {
			tp := rs.TopicIDPartition{TopicID: topicID, Topic: "failover", Partition: int32(i*failoverPartitions + p)}
			bs[i].tps = append(bs[i].tps, tp)
			all = append(all, tp)
		}
	}
	// A cache that consumes every partition, checked for honesty throughout.
	watchPool, err := rs.NewPool(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(watchPool.Close)
	watcher, err := rs.NewPgManager(ctx, watchPool, rs.WithCache())
	require.NoError(t, err)
	t.Cleanup(watcher.Close)
	require.NoError(t, watcher.OnPartitionLeadershipChanges(ctx, nil, all))

	var (
		promoted     atomic.Bool
		promotedAt   time.Time // written before promoted is set
		stop         = make(chan struct{})
		wg           sync.WaitGroup
		totalAcks    atomic.Int64
		enoughBefore = make(chan struct{})
		enoughOnce   sync.Once
	)
	ack := func(b *failoverBroker, r *segmentRecord, state rs.RemoteLogSegmentState) {
		b.mu.Lock()
		defer b.mu.Unlock()
		r.acked, r.ambiguous, r.refused = state, false, false
		if promoted.Load() {
			r.afterPromotion = true
			if b.firstAckAfter.IsZero() {
				b.firstAckAfter = time.Now()
			}
			b.acksAfter++
		}
		if totalAcks.Add(1) >= failoverAcksBefore {
			enoughOnce.Do(func() { close(enoughBefore) })
		}
	}
	failed := func(b *failoverBroker, r *segmentRecord, err error) {
		b.mu.Lock()
		defer b.mu.Unlock()
		if rs.OutcomeUnknown(err) {
			r.ambiguous = true
		} else {
			r.refused = true
		}
	}
	for _, b := range bs {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				tp := b.tps[i%len(b.tps)]
				start := int64(i) * 100
				r := &segmentRecord{seg: rs.RemoteLogSegmentMetadata{
					SegmentID:   rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.New()},
					StartOffset: start, EndOffset: start + 99, State: rs.CopySegmentStarted,
					SegmentLeaderEpochs: map[rs.LeaderEpoch]int64{0: start}, SegmentSizeInBytes: 1,
				}, acked: -1}
				b.mu.Lock()
				b.segs = append(b.segs, r)
				b.mu.Unlock()
				callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
				err := b.m.AddRemoteLogSegmentMetadata(callCtx, r.seg)
				cancel()
				if err != nil {
					failed(b, r, err)
					continue
				}
				ack(b, r, rs.CopySegmentStarted)
				callCtx, cancel = context.WithTimeout(ctx, 2*time.Second)
				err = b.m.UpdateRemoteLogSegmentMetadata(callCtx, rs.RemoteLogSegmentMetadataUpdate{
					SegmentID: r.seg.SegmentID, State: rs.CopySegmentFinished, BrokerID: 7, EventTimestampMs: int64(i)})
				cancel()
				if err != nil {
					failed(b, r, err)
					continue
				}
				ack(b, r, rs.CopySegmentFinished)
			}
		})
	}

	// The cache's honesty: whenever CaughtUp says true, the cache holds
	// every write acknowledged before the call.
	var honest struct {
		sync.Mutex
		trueBefore, trueAfter int
		problems              []string
	}
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			for bi, b := range bs {
				for _, tp := range b.tps {
					b.mu.Lock()
					var want []uuid.UUID
					for _, r := range b.segs {
						if r.seg.SegmentID.TopicIDPartition == tp && r.acked == rs.CopySegmentFinished {
							want = append(want, r.seg.SegmentID.ID)
						}
					}
					b.mu.Unlock()
					callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
					ok, err := watcher.CaughtUp(callCtx, tp)
					cancel()
					if err != nil || !ok {
						continue
					}
					list, err := watcher.ListRemoteLogSegments(ctx, tp)
					if err != nil {
						continue
					}
					have := map[uuid.UUID]rs.RemoteLogSegmentState{}
					for _, s := range list {
						have[s.SegmentID.ID] = s.State
					}
					honest.Lock()
					if promoted.Load() {
						honest.trueAfter++
					} else {
						honest.trueBefore++
					}
					for _, id := range want {
						if have[id] != rs.CopySegmentFinished {
							honest.problems = append(honest.problems, fmt.Sprintf("broker %d %v: CaughtUp true without acknowledged segment %s", bi, tp, id))
						}
					}
					honest.Unlock()
				}
			}
		}
	})

	select {
	case <-enoughBefore:
	case <-ctx.Done():
		t.Fatal("the brokers did not acknowledge enough writes before the failover")
	}
	var ackedWhileCut int64
	if cut != nil {
		// The standby falls behind: cut off from the primary, it receives
		// nothing more, while the asynchronous primary keeps acknowledging.
		cut.setDown(true)
		at := totalAcks.Load()
		testwait.Until(t, "the primary to acknowledge writes while the standby is cut off", func() bool { return totalAcks.Load() >= at+50 })
		ackedWhileCut = totalAcks.Load() - at
	}
	killedAt := time.Now()
	require.NoError(t, primary.Shutdown(ctx, pgcluster.Immediate))
	require.NoError(t, standby.Promote(ctx))
	promotedAt = time.Now()
	promoted.Store(true)
	t.Logf("primary killed (pg_ctl stop -m immediate) and standby promoted (pg_ctl promote -w) in %v", promotedAt.Sub(killedAt).Round(time.Millisecond))

	// A bound on top of the wait: half the test timeout (30 s unscaled).
	resumed := testwait.Until(t, "the brokers to resume writing after the promotion", func() bool {
		done := true
		for _, b := range bs {
			b.mu.Lock()
			done = done && b.acksAfter >= failoverAcksPerBroker
			b.mu.Unlock()
		}
		return done
	})
	require.Less(t, resumed, testwait.Timeout(t)/2, "the brokers did not resume writing within half the test timeout of the promotion")
	close(stop)
	wg.Wait()

	// Once the writes stop, the cache catches up on the new primary: every
	// partition says CaughtUp true within a bound and, with synchronous
	// replication, then holds each acknowledged write. (With asynchronous
	// replication the new primary lacks the lost ones, which the cache may
	// still hold: see RELIABILITY.md.)
	// A bound on top of the waits: a quarter of the test timeout (15 s
	// unscaled) for every partition together.
	caughtUp := time.Now()
	for _, b := range bs {
		for _, tp := range b.tps {
			var err error
			testwait.Until(t, fmt.Sprintf("the cache to catch up on %v", tp), func() bool {
				callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
				defer cancel()
				var ok bool
				ok, err = watcher.CaughtUp(callCtx, tp)
				return err == nil && ok
			})
			require.Less(t, time.Since(caughtUp), testwait.Timeout(t)/4, "the cache did not catch up on %v within a quarter of the test timeout of the last write (%v)", tp, err)
			if !synchronous {
				continue
			}
			list, err := watcher.ListRemoteLogSegments(ctx, tp)
			require.NoError(t, err)
			have := map[uuid.UUID]rs.RemoteLogSegmentState{}
			for _, s := range list {
				have[s.SegmentID.ID] = s.State
			}
			b.mu.Lock()
			for _, r := range b.segs {
				if r.seg.SegmentID.TopicIDPartition == tp && r.acked == rs.CopySegmentFinished {
					require.Equal(t, rs.CopySegmentFinished, have[r.seg.SegmentID.ID], "caught up without acknowledged segment %s", r.seg.SegmentID.ID)
				}
			}
			b.mu.Unlock()
		}
	}
	t.Logf("cache: every partition caught up %v after the last write", time.Since(caughtUp).Round(time.Millisecond))

	// Every acknowledged segment is on the new primary in its acknowledged
	// state (or a later one its ambiguous write may have reached); every
	// cleanly refused write left nothing; ambiguous ones are resolved by
	// reading back.
	newPrimary, err := pgxpool.New(ctx, standby.URL("postgres"))
	require.NoError(t, err)
	defer newPrimary.Close()
	stored := map[uuid.UUID]rs.RemoteLogSegmentState{}
	for _, tp := range all {
		list, err := bs[0].m.ListRemoteLogSegments(ctx, tp)
		require.NoError(t, err)
		for _, s := range list {
			stored[s.SegmentID.ID] = s.State
		}
	}
	var acked, lost, ambiguous, ambiguousApplied, refusedApplied, ackedAfter int
	var lostIDs []string
	var resume []time.Duration
	for _, b := range bs {
		resume = append(resume, b.firstAckAfter.Sub(promotedAt))
		for _, r := range b.segs {
			state, present := stored[r.seg.SegmentID.ID]
			if r.afterPromotion {
				ackedAfter++
			}
			if r.acked >= 0 {
				acked++
				// The last write after the acknowledged one may have landed
				// only if it was ambiguous.
				okState := state == r.acked || (r.ambiguous && state == rs.CopySegmentFinished)
				if !present || !okState {
					lost++
					lostIDs = append(lostIDs, fmt.Sprintf("%s acked %v, stored %v (present %v)", r.seg.SegmentID.ID, r.acked, state, present))
				}
			}
			switch {
			case r.ambiguous:
				ambiguous++
				wantState := rs.CopySegmentStarted
				if r.acked == rs.CopySegmentStarted {
					wantState = rs.CopySegmentFinished
				}
				if present && state == wantState {
					ambiguousApplied++
				}
			case r.refused:
				// OutcomeUnknown false: the write was not applied.
				if r.acked < 0 && present || r.acked == rs.CopySegmentStarted && state == rs.CopySegmentFinished {
					refusedApplied++
				}
			}
		}
	}
	slices.Sort(resume)
	mode := "asynchronous"
	if synchronous {
		mode = "synchronous"
	}
	t.Logf("%s replication: %d writes acknowledged (%d after the promotion), %d lost; %d ambiguous (OutcomeUnknown), %d of them applied, resolved by reading back; writes resumed %v after the promotion (per broker: %v)",
		mode, acked, ackedAfter, lost, ambiguous, ambiguousApplied, resume[0].Round(time.Millisecond), roundAll(resume))
	honest.Lock()
	t.Logf("cache: CaughtUp true %d times before and %d after the promotion; %d times without an acknowledged write %v",
		honest.trueBefore, honest.trueAfter, len(honest.problems), honest.problems[:min(2, len(honest.problems))])
	if synchronous {
		require.Zero(t, lost, "acknowledged writes lost: %v", lostIDs)
		require.Empty(t, honest.problems)
	} else {
		t.Logf("asynchronous: the standby was cut off while %d writes were acknowledged; %d acknowledged segments lost or in an older state on the new primary", ackedWhileCut, lost)
		require.Positive(t, lost, "writes acknowledged while the asynchronous standby was cut off cannot be on it")
	}
	honest.Unlock()
	require.Zero(t, refusedApplied, "a write refused with OutcomeUnknown false was applied")

	// The write order went on past the failover: the new primary's
	// sequence handed out no number a surviving row already had, so every
	// partition's list keys are still unique.
	var duplicates int
	require.NoError(t, newPrimary.QueryRow(ctx, `SELECT count(*) FROM (
		SELECT 1 FROM rlmm_segments GROUP BY topic_id, partition, start_offset, added_version HAVING count(*) > 1) d`).Scan(&duplicates))
	require.Zero(t, duplicates, "list keys (start offset, added_version) taken twice in a partition")

	fenceOldPrimary(t, ctx, primary, standby, dsn, all[0], synchronous)
}

// fenceOldPrimary brings the old primary back as the runbook says: pg_rewind
// against the new primary where the server binaries have it (else a fresh
// base backup of the new primary: pgcluster's Rewind), which also makes it
// a standby of it; then the
// brokers' DSN, which still lists it first, never writes to it, and it
// rejoins as the new primary's synchronous standby.
func fenceOldPrimary(t *testing.T, ctx context.Context, old, newPrimary *pgcluster.Cluster, dsn string, tp rs.TopicIDPartition, synchronous bool) {
	t.Helper()
	out, err := old.Rewind(ctx, newPrimary)
	require.NoError(t, err, out)
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "pg_rewind:") || strings.HasPrefix(line, "pgcluster:") {
			t.Log(line)
		}
	}
	require.NoError(t, old.Startup(ctx))
	var inRecovery bool
	oldConn, err := pgx.Connect(ctx, old.URL("postgres"))
	require.NoError(t, err)
	defer oldConn.Close(context.Background())
	require.NoError(t, oldConn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery))
	require.True(t, inRecovery, "the fenced old primary runs as a standby")
	if synchronous {
		t.Cleanup(func() {
			if t.Failed() {
				b, _ := os.ReadFile(old.LogFile())
				t.Logf("old primary's log:\n%s", b)
			}
		})
		requireSyncStandby(t, ctx, newPrimary, "node1")
	}

	// A broker started now, on the same DSN (old primary first): it skips
	// the read-only old primary and writes to the new one.
	pool, err := rs.NewPool(ctx, dsn)
	require.NoError(t, err)
	defer pool.Close()
	m, err := rs.NewPgManager(ctx, pool)
	require.NoError(t, err)
	defer m.Close()
	var port int
	require.NoError(t, pool.QueryRow(ctx, "SELECT inet_server_port()").Scan(&port))
	require.Equal(t, newPrimary.Port(), port, "the pool connected to the new primary")
	s := rs.RemoteLogSegmentMetadata{
		SegmentID:   rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.New()},
		StartOffset: 1 << 40, EndOffset: 1<<40 + 9, SegmentLeaderEpochs: map[rs.LeaderEpoch]int64{0: 1 << 40},
	}
	require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, s))
	// The old primary refuses writes outright, and receives this one by
	// replication only.
	_, err = oldConn.Exec(ctx, "UPDATE rlmm_partitions SET delete_version = delete_version WHERE false")
	require.ErrorContains(t, err, "read-only transaction")
	testwait.Until(t, "the fenced old primary to replicate from the new one", func() bool {
		var n int
		err := oldConn.QueryRow(ctx, "SELECT count(*) FROM rlmm_segments WHERE segment_id = $1", s.SegmentID.ID).Scan(&n)
		return err == nil && n == 1
	})
}

// streamThroughProxy makes the standby stream from the primary through a
// proxy the test can take down, and waits until it streams through it.
func streamThroughProxy(t *testing.T, ctx context.Context, primary, standby *pgcluster.Cluster) *proxy {
	t.Helper()
	p, viaProxy := startProxy(t, primary.TCPURL("postgres"))
	cfg, err := pgx.ParseConfig(viaProxy)
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, standby.URL("postgres"))
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, fmt.Sprintf("ALTER SYSTEM SET primary_conninfo = 'host=%s port=%d user=postgres'", cfg.Host, cfg.Port))
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "SELECT pg_reload_conf()")
	require.NoError(t, err)
	pconn, err := pgx.Connect(ctx, primary.URL("postgres"))
	require.NoError(t, err)
	defer pconn.Close(context.Background())
	defer func() {
		if t.Failed() {
			t.Logf("pg_stat_replication: %s", replicationState(ctx, pconn))
		}
	}()
	testwait.Until(t, "the standby to stream through the proxy", func() bool {
		var n int
		err := pconn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_replication WHERE client_addr IS NOT NULL AND state = 'streaming'").Scan(&n)
		return err == nil && n == 1
	})
	return p
}

// requireSyncStandby names standby (its cluster_name) in the primary's
// synchronous_standby_names and waits until it is the synchronous standby.
func requireSyncStandby(t *testing.T, ctx context.Context, primary *pgcluster.Cluster, standby string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, primary.URL("postgres"))
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, "ALTER SYSTEM SET synchronous_standby_names = "+pgx.Identifier{standby}.Sanitize())
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "SELECT pg_reload_conf()")
	require.NoError(t, err)
	defer func() {
		if t.Failed() {
			t.Logf("pg_stat_replication: %s", replicationState(ctx, conn))
		}
	}()
	testwait.Until(t, standby+" to be the synchronous standby", func() bool {
		var state string
		err := conn.QueryRow(ctx, "SELECT sync_state FROM pg_stat_replication WHERE application_name = $1", standby).Scan(&state)
		return err == nil && state == "sync"
	})
}

// replicationState describes pg_stat_replication, for failure messages.
func replicationState(ctx context.Context, conn *pgx.Conn) string {
	rows, err := conn.Query(ctx, "SELECT application_name || ' ' || state || ' ' || sync_state FROM pg_stat_replication")
	if err != nil {
		return err.Error()
	}
	list, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err.Error()
	}
	return fmt.Sprint(list)
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}
