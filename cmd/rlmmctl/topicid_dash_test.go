package main

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
)

// dashTopicID returns a random topic id whose Kafka form starts with '-'
// and then second (one in 64 ids do; "" for any second letter).
func dashTopicID(t *testing.T, second string) uuid.UUID {
	t.Helper()
	for {
		id := uuid.New()
		id[0] = 0xf8 | id[0]&0x03 // the first 6 bits: 62, '-'
		if k := kafkaTopicID(id); strings.HasPrefix(k, "-"+second) {
			return id
		}
	}
}

// Every command that takes a topic id takes it as Kafka prints it, also
// when it starts with '-' (and then with the letter of a shorthand flag):
// as an argument of segments plot, before or after the flags, and as the
// value of --topic-id, with or without '='.
func TestTopicIDStartingWithDash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	_, m, closeManager := testManager(t, dsn)
	defer closeManager()

	for _, second := range []string{"", "n", "o", "h", "-"} {
		id := dashTopicID(t, second)
		tp := remotestorage.TopicIDPartition{TopicID: id, Topic: "dashed", Partition: 0}
		seg := remotestorage.RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.New()}
		require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, remotestorage.RemoteLogSegmentMetadata{
			SegmentID: seg, StartOffset: 0, EndOffset: 99, State: remotestorage.CopySegmentStarted,
			SegmentLeaderEpochs: map[remotestorage.LeaderEpoch]int64{0: 0}, TxnIndexEmpty: true,
		}))
		require.NoError(t, m.UpdateRemoteLogSegmentMetadata(ctx, remotestorage.RemoteLogSegmentMetadataUpdate{
			SegmentID: seg, State: remotestorage.CopySegmentFinished,
		}))
		k := kafkaTopicID(id)
		for _, args := range [][]string{
			{"segments", "plot", k, "0", "-o", "-"},
			{"segments", "plot", "-o", "-", k, "0"},
			{"segments", "plot", k, "-o", "-", "0"},
			{"segments", "plot", "-o-", k, "0"},
			{"segments", "list", "--topic-id", k, "--partition", "0"},
			{"segments", "list", "--topic-id=" + k, "--partition", "0"},
			{"lookup", "--topic-id", k, "--partition", "0", "--epoch", "0", "--offset", "50"},
			{"highest-offset", "--topic-id", k, "--partition", "0", "--epoch", "0"},
			{"partitions", "list", "--topic-id", k},
			{"partitions", "set-delete-state", "--topic-id", k, "--partition", "0", "DELETE_PARTITION_MARKED"},
		} {
			out := ok(t, dsn, args...)
			require.NotEmpty(t, out, "%v", args)
			if args[1] == "plot" {
				require.Contains(t, out, seg.ID.String(), "%v", args)
			}
		}
	}
}
