package remotestorage_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/sampledata"
)

func TestStuckWork(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	sampledata.Seed(t, pool) // orders-0: a copy at 4000 and a delete at 5000 aged 2h; payments-0 MARKED just now
	ctx := t.Context()

	r, err := rs.StuckWork(ctx, pool, time.Hour)
	require.NoError(t, err)
	require.Len(t, r.Items, 2, "%+v", r.Items)
	require.Equal(t, 2, r.Segments())
	require.Zero(t, r.Partitions(), "payments-0 was marked just now")
	byState := map[string]rs.StuckItem{}
	for _, it := range r.Items {
		require.Equal(t, rs.StuckSegment, it.Kind)
		require.Equal(t, "orders", it.Partition.Topic)
		require.NotEqual(t, uuid.Nil, it.SegmentID)
		require.GreaterOrEqual(t, it.Age, 2*time.Hour-time.Minute)
		require.Less(t, it.Age, 3*time.Hour)
		require.WithinDuration(t, time.Now(), it.EventTime, time.Hour, "the broker's clock: the event was just now")
		byState[it.State] = it
	}
	copyStuck, deleteStuck := byState["COPY_SEGMENT_STARTED"], byState["DELETE_SEGMENT_STARTED"]
	require.EqualValues(t, 4000, copyStuck.StartOffset)
	require.EqualValues(t, 4999, copyStuck.EndOffset)
	require.EqualValues(t, 1400, copyStuck.SizeBytes)
	require.EqualValues(t, 1, copyStuck.BrokerID, "the broker that started the copy")
	require.EqualValues(t, 5000, deleteStuck.StartOffset)
	require.EqualValues(t, 2, deleteStuck.BrokerID, "the broker that started the delete")

	// Nothing is older than 3 hours; everything in flight is older than 0.
	r, err = rs.StuckWork(ctx, pool, 3*time.Hour)
	require.NoError(t, err)
	require.Empty(t, r.Items)
	r, err = rs.StuckWork(ctx, pool, 0)
	require.NoError(t, err)
	require.Equal(t, 2, r.Segments())
	require.Equal(t, 1, r.Partitions())
	counts, err := rs.CountStuckWork(ctx, pool, 0)
	require.NoError(t, err)
	require.ElementsMatch(t, []rs.StuckCount{
		{Kind: rs.StuckSegment, State: "COPY_SEGMENT_STARTED", Count: 1},
		{Kind: rs.StuckSegment, State: "DELETE_SEGMENT_STARTED", Count: 1},
		{Kind: rs.StuckPartition, State: "DELETE_PARTITION_MARKED", Count: 1},
	}, counts, "CountStuckWork counts what StuckWork lists")
	counts, err = rs.CountStuckWork(ctx, pool, 3*time.Hour)
	require.NoError(t, err)
	require.Empty(t, counts)
	_, err = rs.CountStuckWork(ctx, pool, -time.Second)
	require.ErrorContains(t, err, "negative")
	var part rs.StuckItem
	for _, it := range r.Items {
		if it.Kind == rs.StuckPartition {
			part = it
		}
	}
	require.Equal(t, "payments", part.Partition.Topic)
	require.Equal(t, "DELETE_PARTITION_MARKED", part.State)
	require.EqualValues(t, 3, part.BrokerID)
	require.Equal(t, uuid.Nil, part.SegmentID)

	// A repair is a write: it stamps updated_at, the clock restarts.
	_, err = pool.Exec(ctx, `SELECT rlmm_set_segment_state($1, 'delete_finished')`, deleteStuck.SegmentID)
	require.NoError(t, err)
	r, err = rs.StuckWork(ctx, pool, time.Hour)
	require.NoError(t, err)
	require.Len(t, r.Items, 1)
	require.Equal(t, copyStuck.SegmentID, r.Items[0].SegmentID)

	// The segments of a partition whose delete finished are forgotten, not stuck.
	m, err := rs.NewPgManager(ctx, pool)
	require.NoError(t, err)
	defer m.Close()
	gone := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "gone", Partition: 0}
	require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadata{
		SegmentID: rs.RemoteLogSegmentID{TopicIDPartition: gone, ID: uuid.New()}, StartOffset: 0, EndOffset: 9,
		BrokerID: 7, EventTimestampMs: time.Now().UnixMilli(), State: rs.CopySegmentStarted,
		SegmentLeaderEpochs: map[rs.LeaderEpoch]int64{0: 0}, TxnIndexEmpty: true}))
	for _, st := range []rs.RemotePartitionDeleteState{rs.DeletePartitionMarked, rs.DeletePartitionStarted, rs.DeletePartitionFinished} {
		require.NoError(t, m.PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{
			TopicIDPartition: gone, State: st, BrokerID: 7, EventTimestampMs: time.Now().UnixMilli()}))
	}
	_, err = pool.Exec(ctx, `UPDATE rlmm_segments SET updated_at = now() - interval '2 hours' WHERE topic = 'gone'`)
	require.NoError(t, err)
	r, err = rs.StuckWork(ctx, pool, time.Hour)
	require.NoError(t, err)
	require.Len(t, r.Items, 1, "%+v", r.Items)

	_, err = rs.StuckWork(ctx, pool, -time.Second)
	require.ErrorContains(t, err, "negative")
}
