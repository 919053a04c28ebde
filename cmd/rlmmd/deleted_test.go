package main

import (
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	rs "github.com/krabka/remotestorage"

	"github.com/krabka/remotestorage/internal/testwait"
	pb "github.com/krabka/remotestorage/proto/remotestorage/v1"
)

// deletedFlags is the partition_deleted field of every read of one
// partition, by method, with whether the read found anything.
type deletedFlags map[string]bool

// readFlags asks every read of tp (epoch 0, offset 5) and returns their
// partition_deleted fields; found says whether any read found something.
func readFlags(t *testing.T, c pb.RemoteLogMetadataServiceClient, tp *pb.TopicIdPartition) (flags deletedFlags, found bool) {
	t.Helper()
	ctx := callCtx(t)
	flags = deletedFlags{}

	get, err := c.GetSegment(ctx, &pb.GetSegmentRequest{TopicIdPartition: tp, Epoch: 0, Offset: 5})
	require.NoError(t, err)
	flags["GetSegment"], found = get.PartitionDeleted, found || get.Segment != nil

	highest, err := c.HighestOffsetForEpoch(ctx, &pb.HighestOffsetForEpochRequest{TopicIdPartition: tp, Epoch: 0})
	require.NoError(t, err)
	flags["HighestOffsetForEpoch"], found = highest.PartitionDeleted, found || highest.Found

	end, err := c.EpochEndOffset(ctx, &pb.EpochEndOffsetRequest{TopicIdPartition: tp, Epoch: 0})
	require.NoError(t, err)
	flags["EpochEndOffset"], found = end.PartitionDeleted, found || end.Found

	size, err := c.RemoteLogSize(ctx, &pb.RemoteLogSizeRequest{TopicIdPartition: tp, Epoch: 0})
	require.NoError(t, err)
	flags["RemoteLogSize"], found = size.PartitionDeleted, found || size.SizeBytes > 0

	next, err := c.NextSegmentWithTxnIndex(ctx, &pb.NextSegmentWithTxnIndexRequest{TopicIdPartition: tp, Epoch: 0, Offset: 0})
	require.NoError(t, err)
	flags["NextSegmentWithTxnIndex"], found = next.PartitionDeleted, found || next.Segment != nil

	first, err := c.FirstSegmentForTimestamp(ctx, &pb.FirstSegmentForTimestampRequest{TopicIdPartition: tp, Epoch: 0})
	require.NoError(t, err)
	flags["FirstSegmentForTimestamp"], found = first.PartitionDeleted, found || first.Segment != nil

	zero := int32(0)
	for name, req := range map[string]*pb.ListSegmentsRequest{
		"ListSegments":        {TopicIdPartition: tp},
		"ListSegmentsByEpoch": {TopicIdPartition: tp, Epoch: &zero},
	} {
		stream, err := c.ListSegments(ctx, req)
		require.NoError(t, err)
		var messages []*pb.ListSegmentsResponse
		for {
			resp, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			messages = append(messages, resp)
		}
		for i, m := range messages {
			found = found || len(m.Segments) > 0
			if m.PartitionDeleted {
				require.Len(t, messages, 1, "%s: a deleted partition's stream is one message", name)
				require.Empty(t, m.Segments, "%s: message %d says deleted and holds segments", name, i)
				flags[name] = true
			}
		}
		if !flags[name] {
			flags[name] = false
		}
	}
	return flags, found
}

func requireFlags(t *testing.T, flags deletedFlags, want bool, when string) {
	t.Helper()
	require.Len(t, flags, 8)
	for name, got := range flags {
		require.Equal(t, want, got, "%s: partition_deleted %s", name, when)
	}
}

// TestDeletedPartitionIsNamed: every read of a partition whose deletion has
// finished says so in its answer, whether rlmmd consumes the partition (its
// cache answers), does not (the database answers), or learned of the
// deletion from another rlmmd; a partition never seen, an empty one and one
// whose deletion has only started do not.
func TestDeletedPartitionIsNamed(t *testing.T) {
	t.Parallel()
	b := startDaemon(t, nil)
	other := startDaemon(t, func(c *config) { c.databaseURL = b.dsn })
	ctx := callCtx(t)

	assigned, unassigned, elsewhere := newTP(), newTP(), newTP()
	_, err := b.client.OnPartitionLeadershipChanges(ctx, &pb.OnPartitionLeadershipChangesRequest{
		Leaders: []*pb.TopicIdPartition{assigned, elsewhere},
	})
	require.NoError(t, err)
	// elsewhere is written and deleted through the other rlmmd, which does
	// not consume it.
	for _, tc := range []struct {
		tp       *pb.TopicIdPartition
		w        pb.RemoteLogMetadataServiceClient
		consumed bool // by b, whose answers are checked
	}{{assigned, b.client, true}, {unassigned, b.client, false}, {elsewhere, other.client, true}} {
		tp, w := tc.tp, tc.w
		if tc.consumed {
			waitCaughtUp(t, b.client, tp) // loaded
		}
		flags, found := readFlags(t, b.client, tp)
		require.False(t, found)
		requireFlags(t, flags, false, "of a partition never seen")

		seg := newSegment(tp, 0, 9, &pb.EpochStart{Epoch: 0, StartOffset: 0})
		_, err := w.AddSegment(ctx, &pb.AddSegmentRequest{Segment: seg})
		require.NoError(t, err)
		finish(t, w, seg)
		for _, st := range []pb.PartitionDeleteState{
			pb.PartitionDeleteState_PARTITION_DELETE_STATE_DELETE_PARTITION_MARKED,
			pb.PartitionDeleteState_PARTITION_DELETE_STATE_DELETE_PARTITION_STARTED,
		} {
			_, err = w.PutPartitionDelete(ctx, &pb.PutPartitionDeleteRequest{PartitionDelete: &pb.PartitionDelete{
				TopicIdPartition: tp, State: st, EventTimestampMs: 7, BrokerId: 1,
			}})
			require.NoError(t, err)
		}
		if tc.consumed {
			waitCaughtUp(t, b.client, tp)
		}
		flags, found = readFlags(t, b.client, tp)
		require.True(t, found, "the segment is still there while the deletion runs")
		requireFlags(t, flags, false, "while the deletion runs")

		_, err = w.PutPartitionDelete(ctx, &pb.PutPartitionDeleteRequest{PartitionDelete: &pb.PartitionDelete{
			TopicIdPartition: tp, State: pb.PartitionDeleteState_PARTITION_DELETE_STATE_DELETE_PARTITION_FINISHED,
			EventTimestampMs: 8, BrokerId: 1,
		}})
		require.NoError(t, err)
		if tc.consumed {
			waitCaughtUp(t, b.client, tp)
		}
		flags, found = readFlags(t, b.client, tp)
		require.False(t, found)
		requireFlags(t, flags, true, "once the deletion finished")

		// A write to it still fails as it did.
		_, err = w.AddSegment(ctx, &pb.AddSegmentRequest{Segment: newSegment(tp, 10, 19, &pb.EpochStart{Epoch: 0, StartOffset: 10})})
		requireStatus(t, err, codes.InvalidArgument, rs.ErrInvalidAdd, false)
	}

	// An empty epoch of a live partition is not a deleted partition.
	live := newTP()
	seg := newSegment(live, 0, 9, &pb.EpochStart{Epoch: 4, StartOffset: 0})
	_, err = b.client.AddSegment(ctx, &pb.AddSegmentRequest{Segment: seg})
	require.NoError(t, err)
	finish(t, b.client, seg)
	flags, found := readFlags(t, b.client, live)
	require.True(t, found, "ListSegments finds the epoch-4 segment")
	requireFlags(t, flags, false, "of a live partition")
}

// waitCaughtUp waits until rlmmd, which consumes tp, says its reads of tp
// see every committed write.
func waitCaughtUp(t *testing.T, c pb.RemoteLogMetadataServiceClient, tp *pb.TopicIdPartition) {
	t.Helper()
	ctx := callCtx(t)
	testwait.Until(t, "rlmmd caught up", func() bool {
		r, err := c.CaughtUp(ctx, &pb.CaughtUpRequest{TopicIdPartition: tp})
		return err == nil && r.CaughtUp
	})
}

// TestReadsWaitForThePartitionsLoad: a read of a partition rlmmd was just
// given, while its cache still loads it, waits for the load and answers,
// as Kafka's managers do; CaughtUp says at once that it is loading.
func TestReadsWaitForThePartitionsLoad(t *testing.T) {
	t.Parallel()
	b := startDaemon(t, nil)
	ctx := callCtx(t)
	tp := newTP()
	seg := newSegment(tp, 0, 9, &pb.EpochStart{Epoch: 0, StartOffset: 0})
	_, err := b.client.AddSegment(ctx, &pb.AddSegmentRequest{Segment: seg})
	require.NoError(t, err)
	finish(t, b.client, seg)

	// The load reads rlmm_segments: hold it until the reads are waiting.
	release := holdLock(t, b.dsn, "LOCK TABLE rlmm_segments IN ACCESS EXCLUSIVE MODE")
	defer release()
	_, err = b.client.OnPartitionLeadershipChanges(ctx, &pb.OnPartitionLeadershipChangesRequest{Leaders: []*pb.TopicIdPartition{tp}})
	require.NoError(t, err)
	_, err = b.client.CaughtUp(ctx, &pb.CaughtUpRequest{TopicIdPartition: tp})
	requireStatus(t, err, codes.Unavailable, rs.ErrNotReady, false)

	type answer struct {
		get  *pb.GetSegmentResponse
		list []*pb.Segment
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		var a answer
		a.get, a.err = b.client.GetSegment(ctx, &pb.GetSegmentRequest{TopicIdPartition: tp, Epoch: 0, Offset: 5})
		if a.err == nil {
			var stream pb.RemoteLogMetadataService_ListSegmentsClient
			if stream, a.err = b.client.ListSegments(ctx, &pb.ListSegmentsRequest{TopicIdPartition: tp}); a.err == nil {
				for {
					resp, err := stream.Recv()
					if err != nil {
						if !errors.Is(err, io.EOF) {
							a.err = err
						}
						break
					}
					a.list = append(a.list, resp.Segments...)
				}
			}
		}
		done <- a
	}()
	waitForLockWait(t, b.dsn) // the load waits on the lock
	release()
	a := <-done
	require.NoError(t, a.err, "a read while the partition loads")
	require.NotNil(t, a.get.Segment)
	require.Len(t, a.list, 1)
}
