package remotestorage_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgcluster"
	"github.com/krabka/remotestorage/internal/rstest"
	"github.com/krabka/remotestorage/internal/testwait"
)

// A manager reading from a hot standby: CaughtUp is false while the standby
// lags (replay paused on purpose) and the write is invisible; once replay
// resumes, CaughtUp turns true within a bounded time and the write is
// visible. When the standby is down, CaughtUp fails with ErrIO.
func TestReadReplica(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	m, _, standby, standbyCluster := replicaManager(t)
	tp := testTP(0)

	first := writeFinished(t, m, tp, 0, 99)
	waitCaughtUp(t, m, tp)
	got, found, err := m.RemoteLogSegmentMetadata(ctx, tp, 0, 50)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, first.SegmentID, got.SegmentID)

	pauseReplay(t, standby)
	second := writeFinished(t, m, tp, 100, 199)
	ok, err := m.CaughtUp(ctx, tp)
	require.NoError(t, err)
	require.False(t, ok, "the standby cannot have replayed the write")
	_, found, err = m.RemoteLogSegmentMetadata(ctx, tp, 0, 150)
	require.NoError(t, err)
	require.False(t, found, "the write is not on the standby yet")
	list, err := m.ListRemoteLogSegments(ctx, tp)
	require.NoError(t, err)
	require.Len(t, list, 1)

	resumeReplay(t, standby)
	start := time.Now()
	waitCaughtUp(t, m, tp)
	t.Logf("caught up %s after replay resumed", time.Since(start))
	got, found, err = m.RemoteLogSegmentMetadata(ctx, tp, 0, 150)
	require.NoError(t, err)
	require.True(t, found, "a query after a true CaughtUp sees the write")
	require.Equal(t, second.SegmentID, got.SegmentID)

	require.NoError(t, standbyCluster.Shutdown(ctx, pgcluster.Fast))
	_, err = m.CaughtUp(ctx, tp)
	require.ErrorIs(t, err, rs.ErrIO)
	// Writes go to the primary, which is still up.
	writeFinished(t, m, tp, 200, 299)
}

// A replica's CaughtUp answers per partition: with the standby's replay
// paused behind a write to partition A, partition B, whose writes were all
// replayed before the pause, is caught up and its queries see them, while A
// is not and its queries do not see the write; after replay resumes A turns
// true and sees it. The same for a partition-delete write to A, which
// changes no segment row: A false, B true, and the delete record on the
// standby once A turns true again. A resync (rlmm_resync) makes both false
// until it is replayed.
func TestReplicaCaughtUpPerPartition(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	m, primary, standby, _ := replicaManager(t)
	a, b := testTP(0), testTP(1)

	writeFinished(t, m, a, 0, 99)
	onB := writeFinished(t, m, b, 0, 99)
	waitCaughtUp(t, m, a)
	waitCaughtUp(t, m, b)

	pauseReplay(t, standby)
	second := writeFinished(t, m, a, 100, 199)
	requireCaughtUp(t, m, b, true, "B had no write since its last replayed one")
	got, found, err := m.RemoteLogSegmentMetadata(ctx, b, 0, 50)
	require.NoError(t, err)
	require.True(t, found, "a query on B after a true CaughtUp sees B's write")
	require.Equal(t, onB.SegmentID, got.SegmentID)
	requireCaughtUp(t, m, a, false, "the standby has not replayed A's write")
	_, found, err = m.RemoteLogSegmentMetadata(ctx, a, 0, 150)
	require.NoError(t, err)
	require.False(t, found, "A's write is not on the standby yet")

	resumeReplay(t, standby)
	waitCaughtUp(t, m, a)
	got, found, err = m.RemoteLogSegmentMetadata(ctx, a, 0, 150)
	require.NoError(t, err)
	require.True(t, found, "a query on A after a true CaughtUp sees A's write")
	require.Equal(t, second.SegmentID, got.SegmentID)

	// A partition-delete write stamps the partition row only.
	pauseReplay(t, standby)
	require.NoError(t, m.PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{
		TopicIDPartition: a, State: rs.DeletePartitionMarked, BrokerID: 1, EventTimestampMs: 1,
	}))
	requireCaughtUp(t, m, a, false, "the standby has not replayed A's delete record")
	_, marked, err := m.PartitionDeleteState(ctx, a)
	require.NoError(t, err)
	require.False(t, marked, "A's delete record is not on the standby yet")
	requireCaughtUp(t, m, b, true, "B had no write since its last replayed one")

	resumeReplay(t, standby)
	waitCaughtUp(t, m, a)
	state, marked, err := m.PartitionDeleteState(ctx, a)
	require.NoError(t, err)
	require.True(t, marked, "a query on A after a true CaughtUp sees its delete record")
	require.Equal(t, rs.DeletePartitionMarked, state)

	// rlmm_resync(), which a DBA runs after raw DML, concerns every
	// partition.
	pauseReplay(t, standby)
	_, err = primary.Exec(ctx, "SELECT rlmm_resync()")
	require.NoError(t, err)
	requireCaughtUp(t, m, a, false, "the standby has not replayed the resync")
	requireCaughtUp(t, m, b, false, "the standby has not replayed the resync")
	resumeReplay(t, standby)
	waitCaughtUp(t, m, a)
	waitCaughtUp(t, m, b)
}

// A write that forgets a segment, not replayed yet, whose row the purge
// has since deleted on the primary: the standby still lists the segment,
// so CaughtUp is false, though no row on the primary carries the write any
// more (the partition's vanished_xid says a purge deleted rows the
// standby's snapshot may not have seen forgotten).
func TestReplicaCaughtUpPurgedWrite(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	m, _, standby, _ := replicaManager(t)
	a := testTP(0)

	s := writeFinished(t, m, a, 0, 99)
	require.NoError(t, m.UpdateRemoteLogSegmentMetadata(ctx, update(s, rs.DeleteSegmentStarted)))
	waitCaughtUp(t, m, a)

	pauseReplay(t, standby)
	require.NoError(t, m.UpdateRemoteLogSegmentMetadata(ctx, update(s, rs.DeleteSegmentFinished)))
	purged, err := m.PurgeForgotten(ctx, 0)
	require.NoError(t, err)
	require.EqualValues(t, 1, purged)
	requireCaughtUp(t, m, a, false, "the standby has not replayed the write that forgot the segment")
	list, err := m.ListRemoteLogSegments(ctx, a)
	require.NoError(t, err)
	require.Len(t, list, 1, "the standby still lists the segment")

	resumeReplay(t, standby)
	waitCaughtUp(t, m, a)
	list, err = m.ListRemoteLogSegments(ctx, a)
	require.NoError(t, err)
	require.Empty(t, list, "a query after a true CaughtUp sees the segment forgotten")
}

// A write to A that took its transaction id before the standby's replay
// paused and committed after it: the standby's snapshot has it below its
// xmax, running (a hot standby's pg_current_snapshot() lists no running
// transactions, so its text form would call the write seen). CaughtUp(A)
// is false until replay resumes. The write is held between its id and its
// commit by a row lock on its segment.
func TestReplicaCaughtUpWriteInFlightAtPause(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	m, primary, standby, _ := replicaManager(t)
	a, b := testTP(0), testTP(1)

	s := segment(a, 0, 99, map[rs.LeaderEpoch]int64{0: 0})
	require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, s))
	holder, err := primary.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Rollback(context.Background()) })
	_, err = holder.Exec(ctx, "SELECT 1 FROM rlmm_segments WHERE segment_id = $1 FOR UPDATE", s.SegmentID.ID)
	require.NoError(t, err)
	finished := make(chan error, 1)
	go func() { finished <- m.UpdateRemoteLogSegmentMetadata(ctx, update(s, rs.CopySegmentFinished)) }()
	testwait.Until(t, "the finish waits for the segment's row lock, its transaction id taken", func() bool {
		var waiting bool
		require.NoError(t, primary.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE backend_xid IS NOT NULL AND wait_event_type = 'Lock' AND wait_event = 'transactionid')`).Scan(&waiting))
		return waiting
	})
	// A later commit, replayed: the standby's snapshot has the finish's
	// transaction id below its xmax.
	writeFinished(t, m, b, 0, 99)
	waitCaughtUp(t, m, b)
	pauseReplay(t, standby)
	require.NoError(t, holder.Rollback(ctx))
	require.NoError(t, <-finished)

	requireCaughtUp(t, m, a, false, "the standby has not replayed the finish")
	_, found, err := m.RemoteLogSegmentMetadata(ctx, a, 0, 50)
	require.NoError(t, err)
	require.False(t, found, "the finish is not on the standby yet")
	requireCaughtUp(t, m, b, true, "B had no write since its last replayed one")

	resumeReplay(t, standby)
	waitCaughtUp(t, m, a)
	got, found, err := m.RemoteLogSegmentMetadata(ctx, a, 0, 50)
	require.NoError(t, err)
	require.True(t, found, "a query after a true CaughtUp sees the finish")
	require.Equal(t, s.SegmentID, got.SegmentID)
}

// replicaManager returns a manager on a primary of its own that reads from
// a streaming hot standby of it, with pools on both and the standby.
func replicaManager(t *testing.T) (m *rs.PgManager, primary, standby *pgxpool.Pool, standbyCluster *pgcluster.Cluster) {
	t.Helper()
	primary, standby, standbyCluster = rstest.PrimaryAndStandby(t)
	m, err := rs.NewPgManager(t.Context(), primary, rs.WithReadReplica(standby))
	require.NoError(t, err)
	t.Cleanup(m.Close)
	return m, primary, standby, standbyCluster
}

// pauseReplay pauses the standby's replay and waits until it is paused.
func pauseReplay(t *testing.T, standby *pgxpool.Pool) {
	t.Helper()
	_, err := standby.Exec(t.Context(), "SELECT pg_wal_replay_pause()")
	require.NoError(t, err)
	testwait.Until(t, "replay paused", func() bool {
		var state string
		require.NoError(t, standby.QueryRow(t.Context(), "SELECT pg_get_wal_replay_pause_state()").Scan(&state))
		return state == "paused"
	})
}

// resumeReplay resumes the standby's replay.
func resumeReplay(t *testing.T, standby *pgxpool.Pool) {
	t.Helper()
	_, err := standby.Exec(t.Context(), "SELECT pg_wal_replay_resume()")
	require.NoError(t, err)
}

// requireCaughtUp checks m's CaughtUp(tp) once.
func requireCaughtUp(t *testing.T, m *rs.PgManager, tp rs.TopicIDPartition, want bool, why string) {
	t.Helper()
	ok, err := m.CaughtUp(t.Context(), tp)
	require.NoError(t, err)
	require.Equal(t, want, ok, "CaughtUp(%s): %s", tp, why)
}
