package metrics_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/metrics"
)

// Instrument exports the segments a manager purged.
func TestPurgeCountedInMetrics(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	m := rs.NewInMemoryManager()
	im := metrics.Instrument(m)
	tp := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "orders", Partition: 0}
	for i := range int64(3) {
		id := rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.New()}
		require.NoError(t, im.AddRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadata{
			SegmentID: id, StartOffset: i * 100, EndOffset: i*100 + 99, SegmentSizeInBytes: 1024,
			State: rs.CopySegmentStarted, SegmentLeaderEpochs: map[rs.LeaderEpoch]int64{0: i * 100},
		}))
		for _, st := range []rs.RemoteLogSegmentState{rs.DeleteSegmentStarted, rs.DeleteSegmentFinished} {
			require.NoError(t, im.UpdateRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadataUpdate{SegmentID: id, State: st, BrokerID: 1, EventTimestampMs: 1}))
		}
	}
	const want = `
# HELP rlmm_purged_segments_total Forgotten segments this manager deleted (purge.go), in the background and through PurgeForgotten.
# TYPE rlmm_purged_segments_total counter
rlmm_purged_segments_total %d
`
	require.NoError(t, testutil.CollectAndCompare(im, strings.NewReader(fmt.Sprintf(want, 0)), "rlmm_purged_segments_total"))
	n, err := m.PurgeForgotten(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
	require.NoError(t, testutil.CollectAndCompare(im, strings.NewReader(fmt.Sprintf(want, 3)), "rlmm_purged_segments_total"))
	problems, err := testutil.CollectAndLint(im, "rlmm_purged_segments_total")
	require.NoError(t, err)
	require.Empty(t, problems)
}
