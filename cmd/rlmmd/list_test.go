package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	pb "github.com/krabka/remotestorage/proto/remotestorage/v1"
)

// TestListsFitTheClientsMessageLimit: segments with custom metadata near
// its 64 KiB limit, 80 of them (5 MB), reach a client that keeps gRPC's
// default 4 MiB limit on a received message: each message is at most about
// listBatchBytes. Batches of 256 segments whatever their size exceeded it.
func TestListsFitTheClientsMessageLimit(t *testing.T) {
	t.Parallel()
	b := startDaemon(t, nil)
	tp := newTP()
	const n = 80
	meta := bytes.Repeat([]byte{'m'}, 63<<10)
	for i := range n {
		s := newSegment(tp, int64(i*10), int64(i*10+9), &pb.EpochStart{Epoch: 0, StartOffset: int64(i * 10)})
		s.CustomMetadata = meta
		_, err := b.client.AddSegment(callCtx(t), &pb.AddSegmentRequest{Segment: s})
		require.NoError(t, err)
		finish(t, b.client, s)
	}
	got, messages := listAll(t, b.client, &pb.ListSegmentsRequest{TopicIdPartition: tp})
	require.Len(t, got, n)
	for i, s := range got {
		require.Equal(t, int64(i*10), s.StartOffset)
		require.Equal(t, meta, s.CustomMetadata)
	}
	require.GreaterOrEqual(t, messages, n*len(meta)/listBatchBytes, "messages of at most listBatchBytes")
}
