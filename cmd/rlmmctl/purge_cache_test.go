package main

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/testwait"
)

// TestPurgeKeepsCachesHonest: purge (rlmm_purge_round) deletes the row of a
// forgotten segment that a cache has not caught up on (it still holds the
// segment as finished) and heard no notification of. The cache must not
// keep serving it: once it says CaughtUp, it answers what the database
// answers.
func TestPurgeKeepsCachesHonest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	pool, writer, closeWriter := testManager(t, dsn)
	defer closeWriter()
	// The lagging cache: no poll, and its listener dials a port where
	// nobody listens, so it hears no notification: only CaughtUp makes it
	// catch up.
	deaf, err := pgx.ParseConfig("host=127.0.0.1 port=1 user=nobody connect_timeout=1")
	require.NoError(t, err)
	cached, err := remotestorage.NewPgManager(ctx, pool, remotestorage.WithCache(), remotestorage.WithCachePollInterval(0),
		remotestorage.WithListenerConnConfig(deaf))
	require.NoError(t, err)
	defer cached.Close()

	tp := remotestorage.TopicIDPartition{TopicID: uuid.New(), Topic: "orders", Partition: 0}
	var segs []remotestorage.RemoteLogSegmentID
	for i := range int64(3) {
		id := remotestorage.RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.New()}
		require.NoError(t, writer.AddRemoteLogSegmentMetadata(ctx, remotestorage.RemoteLogSegmentMetadata{
			SegmentID: id, StartOffset: 1000 * i, EndOffset: 1000*i + 999, State: remotestorage.CopySegmentStarted,
			SegmentLeaderEpochs: map[remotestorage.LeaderEpoch]int64{0: 1000 * i},
		}))
		require.NoError(t, writer.UpdateRemoteLogSegmentMetadata(ctx, remotestorage.RemoteLogSegmentMetadataUpdate{SegmentID: id, State: remotestorage.CopySegmentFinished}))
		segs = append(segs, id)
	}
	require.NoError(t, cached.OnPartitionLeadershipChanges(ctx, []remotestorage.TopicIDPartition{tp}, nil))
	caughtUp := func() {
		t.Helper()
		testwait.Until(t, "the cache to catch up", func() bool {
			up, err := cached.CaughtUp(ctx, tp)
			require.True(t, err == nil || errors.Is(err, remotestorage.ErrNotReady), "%v", err)
			return err == nil && up
		})
	}
	caughtUp()
	_, found, err := cached.RemoteLogSegmentMetadata(ctx, tp, 0, 1500)
	require.NoError(t, err)
	require.True(t, found)

	// segs[1] is deleted, and purged, while the cache lags.
	for _, st := range []remotestorage.RemoteLogSegmentState{remotestorage.DeleteSegmentStarted, remotestorage.DeleteSegmentFinished} {
		require.NoError(t, writer.UpdateRemoteLogSegmentMetadata(ctx, remotestorage.RemoteLogSegmentMetadataUpdate{SegmentID: segs[1], State: st}))
	}
	_, err = pool.Exec(ctx, `UPDATE rlmm_segments SET updated_at = now() - interval '1 second' WHERE segment_id = $1`, segs[1].ID)
	require.NoError(t, err)
	require.Contains(t, ok(t, dsn, "purge", "--older-than", "0s", "--apply"), "purged 1 segments")

	caughtUp()
	_, found, err = cached.RemoteLogSegmentMetadata(ctx, tp, 0, 1500)
	require.NoError(t, err)
	require.False(t, found, "the purged segment is still served after CaughtUp")
	list, err := cached.ListRemoteLogSegments(ctx, tp)
	require.NoError(t, err)
	want, err := writer.ListRemoteLogSegments(ctx, tp)
	require.NoError(t, err)
	require.Equal(t, want, list)
}
