package main

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
)

func TestPurge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	d := seedInspectData(t, dsn)
	pool, m, closeManager := testManager(t, dsn)
	defer closeManager()

	// Forgotten segments spanning two leader epochs (so with epoch rows):
	// s7 and s8.
	s7 := remotestorage.RemoteLogSegmentID{TopicIDPartition: d.orders, ID: uuid.New()}
	s8 := remotestorage.RemoteLogSegmentID{TopicIDPartition: d.orders, ID: uuid.New()}
	for i, id := range []remotestorage.RemoteLogSegmentID{s7, s8} {
		start := 5000 + 1000*int64(i)
		require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, remotestorage.RemoteLogSegmentMetadata{
			SegmentID: id, StartOffset: start, EndOffset: start + 999, SegmentSizeInBytes: 100, State: remotestorage.CopySegmentStarted,
			SegmentLeaderEpochs: map[remotestorage.LeaderEpoch]int64{1: start, 2: start + 500},
		}))
		for _, st := range []remotestorage.RemoteLogSegmentState{remotestorage.DeleteSegmentStarted, remotestorage.DeleteSegmentFinished} {
			require.NoError(t, m.UpdateRemoteLogSegmentMetadata(ctx, remotestorage.RemoteLogSegmentMetadataUpdate{SegmentID: id, State: st}))
		}
	}
	// Forgotten ten days ago: s0 (its own delete), s8, and the deleted
	// partition (s5, s6). Forgotten now, so kept by a week's retention: s7.
	_, err := pool.Exec(ctx, `UPDATE rlmm_segments SET updated_at = now() - interval '10 days' WHERE segment_id = ANY($1)`,
		[]uuid.UUID{d.s[0], d.s[5], s8.ID})
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE rlmm_partitions SET updated_at = now() - interval '10 days' WHERE topic_id = $1`, d.gone.TopicID)
	require.NoError(t, err)

	count := func(sql string, args ...any) int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, sql, args...).Scan(&n))
		return n
	}
	epochRows := func(ids ...uuid.UUID) int {
		return count(`SELECT count(*) FROM rlmm_segment_epochs WHERE segment_id = ANY($1)`, ids)
	}
	segmentRows := func(ids ...uuid.UUID) int {
		return count(`SELECT count(*) FROM rlmm_segments WHERE segment_id = ANY($1)`, ids)
	}
	old := []uuid.UUID{d.s[0], d.s[5], d.s[6], s8.ID}
	listBefore, err := m.ListRemoteLogSegments(ctx, d.orders)
	require.NoError(t, err)

	// Dry run: a report, no change.
	out := ok(t, dsn, "purge")
	require.Contains(t, out, "would purge 4 segments in 2 topics")
	require.Regexp(t, `(?m)^gone\s+`+d.gone.TopicID.String()+` \(`+kafkaTopicID(d.gone.TopicID)+`\)\s+2\s+`, out)
	require.Regexp(t, `(?m)^orders\s+\S+ \(\S+\)\s+2\s+1.1 KiB\s+2\s+15 B$`, out)
	require.Contains(t, out, "dry run")
	require.Equal(t, 2, epochRows(old...))

	// Apply: the library's purge deletes the old forgotten rows, epoch rows
	// included, and the brokers see no difference.
	out = ok(t, dsn, "purge", "--apply", "--batch-size", "2")
	require.Contains(t, out, "found 4 segments in 2 topics")
	require.Contains(t, out, "purged 4 segments")
	require.Equal(t, 0, epochRows(old...))
	require.Equal(t, 0, segmentRows(old...))
	require.Equal(t, 2, epochRows(s7.ID), "forgotten less than a week ago")
	require.Equal(t, 1, segmentRows(s7.ID))
	listAfter, err := m.ListRemoteLogSegments(ctx, d.orders)
	require.NoError(t, err)
	require.Equal(t, listBefore, listAfter)
	// The deleted partition's segments are gone, and with them its delete
	// record: adds to it work again.
	require.Equal(t, 0, count(`SELECT count(*) FROM rlmm_partitions WHERE topic_id = $1 AND delete_state IS NOT NULL`, d.gone.TopicID))
	// A purged id may be added again.
	require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, remotestorage.RemoteLogSegmentMetadata{
		SegmentID:   remotestorage.RemoteLogSegmentID{TopicIDPartition: d.orders, ID: d.s[0]},
		StartOffset: 9000, EndOffset: 9999, State: remotestorage.CopySegmentStarted,
		SegmentLeaderEpochs: map[remotestorage.LeaderEpoch]int64{0: 9000},
	}))
	require.Contains(t, ok(t, dsn, "purge", "--apply"), "nothing to purge")

	// A zero retention purges what was forgotten a moment ago.
	require.Contains(t, ok(t, dsn, "purge", "--older-than", "0s"), "would purge 1 segments")
	require.Contains(t, ok(t, dsn, "purge", "--older-than", "0s", "--apply"), "purged 1 segments")
	require.Equal(t, 0, segmentRows(s7.ID))

	// --drop-ids is accepted, and changes nothing: purging frees the ids.
	r := rlmmctl(t, nil, "--database-url", dsn, "purge", "--drop-ids")
	require.Equal(t, 0, r.code, r.output())
	require.Contains(t, r.output(), "deprecated")

	r = rlmmctl(t, nil, "--database-url", dsn, "purge", "--older-than", "-1h")
	require.Equal(t, exitUsage, r.code, r.output())
	r = rlmmctl(t, nil, "--database-url", dsn, "purge", "--older-than", "a week")
	require.Equal(t, exitUsage, r.code, r.output())
}
