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
	"github.com/krabka/remotestorage/internal/testsignal"
	"github.com/krabka/remotestorage/internal/testwait"
)

// dbaFollowers are three caches of one partition that learn of a DBA's
// change each in one way only: notified by the listener (no poll), polled
// (notifications dropped), or asked (no poll, notifications dropped: only
// CaughtUp tells it to catch up).
type dbaFollowers struct {
	notified, polled, asked *rs.PgManager
}

// dbaPollInterval is the polled cache's interval.
const dbaPollInterval = 50 * time.Millisecond

func newDBAFollowers(t *testing.T, dsn string, tp rs.TopicIDPartition) dbaFollowers {
	t.Helper()
	f := dbaFollowers{
		notified: newCachedManager(t, dsn, rs.WithCachePollInterval(0)),
		polled:   newCachedManager(t, dsn, rs.WithCachePollInterval(dbaPollInterval)),
		asked:    newCachedManager(t, dsn, rs.WithCachePollInterval(0)),
	}
	for _, m := range f.all() {
		require.NoError(t, m.OnPartitionLeadershipChanges(t.Context(), nil, []rs.TopicIDPartition{tp}))
		waitLoaded(t, m, tp)
	}
	return f
}

func (f dbaFollowers) all() []*rs.PgManager { return []*rs.PgManager{f.notified, f.polled, f.asked} }

// requireHonest checks each follower's promise after a change it was not
// told of directly: the notified and the polled caches come to answer what
// the database answers by themselves (nobody calls CaughtUp on them; the
// deadline only keeps a stale cache from hanging the test), and the asked
// cache says CaughtUp false until it answers what the database answers.
func (f dbaFollowers) requireHonest(t *testing.T, where string, truth rs.Manager, tp rs.TopicIDPartition) {
	t.Helper()
	for name, m := range map[string]*rs.PgManager{"notified": f.notified, "polled": f.polled} {
		func() {
			var diff string
			defer func() {
				if t.Failed() {
					t.Logf("%s: the %s cache's last difference: %s", where, name, diff)
				}
			}()
			testwait.Until(t, fmt.Sprintf("%s: the %s cache to follow", where, name), func() bool {
				diff = answersDiffer(truth, m, tp)
				return diff == ""
			})
		}()
	}
	waitCaughtUp(t, f.asked, tp)
	if diff := answersDiffer(truth, f.asked, tp); diff != "" {
		t.Fatalf("%s: the asked cache answers CaughtUp true but %s", where, diff)
	}
	requireSameAnswers(t, where, truth, f.asked, tp)
}

// answersDiffer compares the answers of got with want's on tp; "" when
// they agree.
func answersDiffer(want, got rs.Manager, tp rs.TopicIDPartition) string {
	ctx := context.Background()
	wantList, err := want.ListRemoteLogSegments(ctx, tp)
	if err != nil {
		return err.Error()
	}
	gotList, err := got.ListRemoteLogSegments(ctx, tp)
	if err != nil {
		return err.Error()
	}
	if w, g := fmt.Sprint(ids(wantList)), fmt.Sprint(ids(gotList)); w != g {
		return fmt.Sprintf("lists %s, the database %s", g, w)
	}
	for e := rs.LeaderEpoch(0); e < 2; e++ {
		wantEnd, wantOK, _ := want.EpochEndOffset(ctx, tp, e)
		gotEnd, gotOK, err := got.EpochEndOffset(ctx, tp, e)
		if err != nil || wantEnd != gotEnd || wantOK != gotOK {
			return fmt.Sprintf("epoch %d ends at %d (%v, %v), the database %d (%v)", e, gotEnd, gotOK, err, wantEnd, wantOK)
		}
		for o := int64(0); o < 1000; o += 50 {
			wantSeg, wantOK, _ := want.RemoteLogSegmentMetadata(ctx, tp, e, o)
			gotSeg, gotOK, err := got.RemoteLogSegmentMetadata(ctx, tp, e, o)
			if err != nil || wantOK != gotOK || wantSeg.SegmentID != gotSeg.SegmentID {
				return fmt.Sprintf("offset %d of epoch %d: found %v %s (%v), the database %v %s", o, e, gotOK, gotSeg.SegmentID.ID, err, wantOK, wantSeg.SegmentID.ID)
			}
		}
	}
	return ""
}

// TestCacheHonestThroughDBARepairs: every way docs/DBA.md lets a DBA
// change the rows by hand - the repair functions (a state, a partition's
// delete state, a purge of a forgotten segment that a cache has not caught
// up on), and raw DML (DELETE, TRUNCATE, UPDATE with the guards off)
// followed by rlmm_resync - leaves every cache either following within its
// poll interval (or at the notification) or answering CaughtUp false.
func TestCacheHonestThroughDBARepairs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// repair changes the partition's rows by hand, after three finished
		// segments [0, 99], [100, 199], [200, 299] (version 6) that every
		// follower holds; it may write through a (not cached).
		repair func(t *testing.T, admin *pgxpool.Pool, a *rs.PgManager, f dbaFollowers, tp rs.TopicIDPartition, segs []rs.RemoteLogSegmentMetadata)
	}{
		{"rlmm_set_segment_state", func(t *testing.T, admin *pgxpool.Pool, _ *rs.PgManager, _ dbaFollowers, _ rs.TopicIDPartition, segs []rs.RemoteLogSegmentMetadata) {
			execSQL(t, admin, `SELECT rlmm_set_segment_state($1, 'delete_started')`, segs[1].SegmentID.ID)
		}},
		{"rlmm_set_segment_state finishes a copy", func(t *testing.T, admin *pgxpool.Pool, a *rs.PgManager, _ dbaFollowers, tp rs.TopicIDPartition, _ []rs.RemoteLogSegmentMetadata) {
			s := segment(tp, 300, 399, map[rs.LeaderEpoch]int64{0: 300, 1: 350})
			require.NoError(t, a.AddRemoteLogSegmentMetadata(t.Context(), s))
			execSQL(t, admin, `SELECT rlmm_set_segment_state($1, 'copy_finished')`, s.SegmentID.ID)
		}},
		{"rlmm_set_partition_delete_state", func(t *testing.T, admin *pgxpool.Pool, _ *rs.PgManager, _ dbaFollowers, tp rs.TopicIDPartition, _ []rs.RemoteLogSegmentMetadata) {
			for _, st := range []string{"delete_marked", "delete_started", "delete_finished"} {
				execSQL(t, admin, `SELECT rlmm_set_partition_delete_state($1, $2, $3)`, tp.TopicID, tp.Partition, st)
			}
		}},
		{"raw DML with the guards off, then rlmm_resync", func(t *testing.T, admin *pgxpool.Pool, _ *rs.PgManager, _ dbaFollowers, tp rs.TopicIDPartition, segs []rs.RemoteLogSegmentMetadata) {
			// A superuser's DML past the guards: nothing tells the caches,
			// until the resync.
			tx, err := admin.Begin(t.Context())
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(t.Context()) }()
			for _, sql := range []string{
				`SET LOCAL session_replication_role = replica`,
				`DELETE FROM rlmm_segment_epochs WHERE segment_id = '` + segs[2].SegmentID.ID.String() + `'`,
				`DELETE FROM rlmm_segments WHERE segment_id = '` + segs[2].SegmentID.ID.String() + `'`,
				`UPDATE rlmm_segments SET state = 2 WHERE segment_id = '` + segs[0].SegmentID.ID.String() + `'`,
				`UPDATE rlmm_segment_epochs SET state = 2 WHERE segment_id = '` + segs[0].SegmentID.ID.String() + `'`,
			} {
				_, err := tx.Exec(t.Context(), sql)
				require.NoError(t, err, sql)
			}
			require.NoError(t, tx.Commit(t.Context()))
			execSQL(t, admin, `SELECT rlmm_resync()`)
		}},
		{"delete a segment, then rlmm_resync", func(t *testing.T, admin *pgxpool.Pool, _ *rs.PgManager, _ dbaFollowers, _ rs.TopicIDPartition, segs []rs.RemoteLogSegmentMetadata) {
			execSQL(t, admin, `DELETE FROM rlmm_segments WHERE segment_id = $1`, segs[1].SegmentID.ID)
			execSQL(t, admin, `SELECT rlmm_resync()`)
		}},
		{"delete a partition's segments, then rlmm_resync", func(t *testing.T, admin *pgxpool.Pool, _ *rs.PgManager, _ dbaFollowers, tp rs.TopicIDPartition, _ []rs.RemoteLogSegmentMetadata) {
			execSQL(t, admin, `DELETE FROM rlmm_segments WHERE topic_id = $1 AND partition = $2`, tp.TopicID, tp.Partition)
			execSQL(t, admin, `SELECT rlmm_resync()`)
		}},
		{"delete a partition, then rlmm_resync", func(t *testing.T, admin *pgxpool.Pool, a *rs.PgManager, _ dbaFollowers, tp rs.TopicIDPartition, _ []rs.RemoteLogSegmentMetadata) {
			execSQL(t, admin, `DELETE FROM rlmm_segments WHERE topic_id = $1 AND partition = $2;`, tp.TopicID, tp.Partition)
			execSQL(t, admin, `DELETE FROM rlmm_epoch_ends WHERE topic_id = $1 AND partition = $2`, tp.TopicID, tp.Partition)
			execSQL(t, admin, `DELETE FROM rlmm_partitions WHERE topic_id = $1 AND partition = $2`, tp.TopicID, tp.Partition)
			execSQL(t, admin, `SELECT rlmm_resync()`)
			writeFinished(t, a, tp, 500, 599) // versions 1 and 2 again
		}},
		{"truncate, rlmm_resync, then fewer writes", func(t *testing.T, admin *pgxpool.Pool, a *rs.PgManager, _ dbaFollowers, tp rs.TopicIDPartition, _ []rs.RemoteLogSegmentMetadata) {
			execSQL(t, admin, `TRUNCATE rlmm_partitions, rlmm_segments, rlmm_segment_epochs, rlmm_epoch_ends`)
			execSQL(t, admin, `SELECT rlmm_resync()`)
			writeFinished(t, a, tp, 500, 599) // versions 1 and 2, below the caches' 6
		}},
		{"truncate, rlmm_resync, then more writes", func(t *testing.T, admin *pgxpool.Pool, a *rs.PgManager, _ dbaFollowers, tp rs.TopicIDPartition, _ []rs.RemoteLogSegmentMetadata) {
			execSQL(t, admin, `TRUNCATE rlmm_partitions, rlmm_segments, rlmm_segment_epochs, rlmm_epoch_ends`)
			execSQL(t, admin, `SELECT rlmm_resync()`)
			for i := range int64(4) { // versions 1 to 8, past the caches' 6
				writeFinished(t, a, tp, 500+100*i, 599+100*i)
			}
		}},
		{"truncate the segments, then rlmm_resync", func(t *testing.T, admin *pgxpool.Pool, a *rs.PgManager, _ dbaFollowers, tp rs.TopicIDPartition, _ []rs.RemoteLogSegmentMetadata) {
			execSQL(t, admin, `TRUNCATE rlmm_segments CASCADE`)
			execSQL(t, admin, `SELECT rlmm_resync()`)
			writeFinished(t, a, tp, 500, 599) // versions 7 and 8: the change feed shows only this one
		}},
		{"purge a forgotten segment a cache has not caught up on", func(t *testing.T, admin *pgxpool.Pool, a *rs.PgManager, f dbaFollowers, _ rs.TopicIDPartition, segs []rs.RemoteLogSegmentMetadata) {
			// The asked cache hears nothing and is not asked: it lags
			// behind the deletion; the others race the purge.
			ctx := t.Context()
			require.NoError(t, a.UpdateRemoteLogSegmentMetadata(ctx, update(segs[1], rs.DeleteSegmentStarted)))
			require.NoError(t, a.UpdateRemoteLogSegmentMetadata(ctx, update(segs[1], rs.DeleteSegmentFinished)))
			// The purge a DBA runs from psql.
			var purged int64
			require.NoError(t, admin.QueryRow(ctx, `SELECT rlmm_purge(interval '0')`).Scan(&purged))
			require.Equal(t, int64(1), purged)
		}},
		{"purge the segment that ends its epoch", func(t *testing.T, admin *pgxpool.Pool, a *rs.PgManager, f dbaFollowers, tp rs.TopicIDPartition, segs []rs.RemoteLogSegmentMetadata) {
			// Its epoch rows go: EpochEndOffset keeps its end from
			// rlmm_epoch_ends, in the database and in a cache that reloads.
			ctx := t.Context()
			require.NoError(t, a.UpdateRemoteLogSegmentMetadata(ctx, update(segs[2], rs.DeleteSegmentStarted)))
			require.NoError(t, a.UpdateRemoteLogSegmentMetadata(ctx, update(segs[2], rs.DeleteSegmentFinished)))
			var purged int64
			require.NoError(t, admin.QueryRow(ctx, `SELECT rlmm_purge(interval '0')`).Scan(&purged))
			require.Equal(t, int64(1), purged)
			end, ok, err := a.EpochEndOffset(ctx, tp, 0)
			require.NoError(t, err)
			require.Equal(t, [2]any{int64(299), true}, [2]any{end, ok}, "EpochEndOffset of the purged segment's epoch")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			dsn := pgtest.NewDatabase(t)
			admin := newPool(t, dsn, 0, false)
			a, err := rs.NewPgManager(ctx, admin) // the writer, and the database's answers
			require.NoError(t, err)
			t.Cleanup(a.Close)
			tp := testTP(0)
			f := newDBAFollowers(t, dsn, tp)
			var segs []rs.RemoteLogSegmentMetadata
			for i := range int64(3) {
				segs = append(segs, writeFinished(t, a, tp, 100*i, 100*i+99))
			}
			for _, m := range f.all() {
				waitCaughtUp(t, m, tp)
				requireSameAnswers(t, "before the repair", a, m, tp)
			}
			f.polled.DropNotifications(true)
			f.asked.DropNotifications(true)

			tc.repair(t, admin, a, f, tp, segs)
			f.requireHonest(t, tc.name, a, tp)

			// And the caches keep following the brokers' writes, to a
			// partition the repair did not delete.
			var deleting bool
			require.NoError(t, admin.QueryRow(ctx, `SELECT delete_state IS NOT NULL FROM rlmm_partitions WHERE topic_id = $1 AND partition = $2`,
				tp.TopicID, tp.Partition).Scan(&deleting))
			if !deleting {
				writeFinished(t, a, tp, 2000, 2099)
				f.requireHonest(t, tc.name+", then a write", a, tp)
			}
		})
	}
}

// TestCacheFollowsAPartitionDeletedAndWrittenAgain: a DBA deletes a
// partition's rows (then rlmm_resync), and a broker writes to it again, from version 1. A
// cache that was at version 6 reloads, and the new writes' notifications
// (versions 1 and 2) come while its reload's snapshot, taken before them,
// is applied: they must still wake it, though they are below the version
// it held until then. The cache hears only notifications (no poll).
func TestCacheFollowsAPartitionDeletedAndWrittenAgain(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.NewDatabase(t)
	admin := newPool(t, dsn, 0, false)
	a := newManager(t, admin)
	tp := testTP(0)
	for i := range int64(3) {
		writeFinished(t, a, tp, 100*i, 100*i+99)
	}
	b := newCachedManager(t, dsn, rs.WithCachePollInterval(0))
	signals := b.TestSignals()
	signals.Init()
	heard := &signals.Heard
	reloadRead, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	b.AfterCatchUpRead(func(_ rs.TopicIDPartition, reload bool) {
		if reload {
			once.Do(func() {
				close(reloadRead)
				<-release
			})
		}
	})
	defer close(release) // a failed test must not leave the hook waiting
	require.NoError(t, b.OnPartitionLeadershipChanges(ctx, nil, []rs.TopicIDPartition{tp}))
	waitLoaded(t, b, tp)
	waitCaughtUp(t, b, tp)
	signals.Listening.WaitUntil(t, "the listener listens", b.Listening)

	// The repair's own notifications are lost, so that one catch-up, the
	// one CaughtUp asks for, reloads.
	b.DropNotifications(true)
	execSQL(t, admin, fmt.Sprintf(`DELETE FROM rlmm_segments WHERE topic_id = '%[1]s' AND partition = %[2]d;
DELETE FROM rlmm_epoch_ends WHERE topic_id = '%[1]s' AND partition = %[2]d;
DELETE FROM rlmm_partitions WHERE topic_id = '%[1]s' AND partition = %[2]d;
SELECT rlmm_resync()`, tp.TopicID, tp.Partition))
	var generation int64
	require.NoError(t, admin.QueryRow(ctx, "SELECT generation FROM rlmm_data_generation").Scan(&generation))
	waitHeard(t, heard, fmt.Sprintf("reset/%d", generation))
	b.DropNotifications(false)
	caughtUp, err := b.CaughtUp(ctx, tp)
	require.NoError(t, err)
	require.False(t, caughtUp, "a cache of a partition deleted since")
	select {
	case <-reloadRead:
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the cache did not reload the partition")
	}
	// A catch-up asked for before (waitCaughtUp's) would read the writes
	// below after this one: only the notifications may ask for one now.
	b.DiscardPendingCatchUp(tp)

	s := writeFinished(t, a, tp, 500, 599)
	var finished int64 // the finish's write order, which its notification carries
	require.NoError(t, admin.QueryRow(ctx, "SELECT last_version FROM rlmm_segments WHERE segment_id = $1", s.SegmentID.ID).Scan(&finished))
	waitHeard(t, heard, fmt.Sprintf("%s/%d/%d", tp.TopicID, tp.Partition, finished))
	release <- struct{}{} // the reload applies its snapshot, taken before the write
	testwait.Until(t, "the cache to hold the segment written after the reload read", func() bool {
		got, ok, err := b.RemoteLogSegmentMetadata(ctx, tp, 0, 550)
		return err == nil && ok && got.SegmentID == s.SegmentID && answersDiffer(a, b, tp) == ""
	})
}

// waitHeard waits until the cache's listener has received payload.
func waitHeard(t *testing.T, heard *testsignal.Signal[string], payload string) {
	t.Helper()
	for {
		if heard.WaitOrTimeout(t) == payload {
			return
		}
	}
}

func execSQL(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	_, err := pool.Exec(t.Context(), sql, args...)
	require.NoError(t, err, sql)
}
