package remotestorage_test

import (
	"testing"
	"time"

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
	primary, standby, standbyCluster := rstest.PrimaryAndStandby(t)
	m, err := rs.NewPgManager(ctx, primary, rs.WithReadReplica(standby))
	require.NoError(t, err)
	t.Cleanup(m.Close)
	tp := testTP(0)

	first := writeFinished(t, m, tp, 0, 99)
	waitCaughtUp(t, m, tp)
	got, found, err := m.RemoteLogSegmentMetadata(ctx, tp, 0, 50)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, first.SegmentID, got.SegmentID)

	_, err = standby.Exec(ctx, "SELECT pg_wal_replay_pause()")
	require.NoError(t, err)
	testwait.Until(t, "replay paused", func() bool {
		var state string
		require.NoError(t, standby.QueryRow(ctx, "SELECT pg_get_wal_replay_pause_state()").Scan(&state))
		return state == "paused"
	})
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

	_, err = standby.Exec(ctx, "SELECT pg_wal_replay_resume()")
	require.NoError(t, err)
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
