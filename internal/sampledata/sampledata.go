// Package sampledata writes the small database that the tests of the DBA
// guide, the stuck-work queries and the stuck-work collector read.
package sampledata

import (
	"math"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
)

// Seed writes, through the library, a bit of everything the DBA queries
// look for: finished segments in orders-0 (with a gap at 2000-2999 and a
// leader-epoch change), an upload left in COPY_SEGMENT_STARTED at 4000 and a
// deletion left in DELETE_SEGMENT_STARTED at 5000, both aged two hours, a
// forgotten segment at 6000, payments-0 marked for deletion just now, and
// audit-0 deleted, and in edge-0 a finished segment of every offset there is
// (0 to math.MaxInt64) with a finished one inside it.
func Seed(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	ctx := t.Context()
	m, err := rs.NewPgManager(ctx, pool)
	require.NoError(t, err)
	defer m.Close()
	now := time.Now().UnixMilli()
	tp := func(topic string, partition int32) rs.TopicIDPartition {
		return rs.TopicIDPartition{TopicID: uuid.NewSHA1(uuid.NameSpaceOID, []byte(topic)), Topic: topic, Partition: partition}
	}
	orders, orders1, payments, audit := tp("orders", 0), tp("orders", 1), tp("payments", 0), tp("audit", 0)
	add := func(tp rs.TopicIDPartition, start int64, epochs map[rs.LeaderEpoch]int64, states ...rs.RemoteLogSegmentState) uuid.UUID {
		id := rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.New()}
		require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadata{
			SegmentID: id, StartOffset: start, EndOffset: start + 999, MaxTimestampMs: now,
			BrokerID: 1, EventTimestampMs: now, SegmentSizeInBytes: int32(start/10 + 1000),
			State: rs.CopySegmentStarted, SegmentLeaderEpochs: epochs, TxnIndexEmpty: true,
		}))
		for _, st := range states {
			require.NoError(t, m.UpdateRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadataUpdate{
				SegmentID: id, State: st, BrokerID: 2, EventTimestampMs: now,
			}))
		}
		return id.ID
	}
	type E = map[rs.LeaderEpoch]int64
	fin, delStarted, delFinished := rs.CopySegmentFinished, rs.DeleteSegmentStarted, rs.DeleteSegmentFinished
	add(orders, 0, E{0: 0}, fin)
	add(orders, 1000, E{0: 1000, 1: 1200}, fin)
	add(orders, 3000, E{1: 3000}, fin) // 2000-2999: a gap
	stuckCopy := add(orders, 4000, E{2: 4000})
	stuckDelete := add(orders, 5000, E{2: 5000}, fin, delStarted)
	add(orders, 6000, E{2: 6000}, fin, delStarted, delFinished)
	add(orders1, 0, E{0: 0}, fin)
	add(payments, 0, E{0: 0}, fin)
	add(audit, 0, E{0: 0}, fin)
	// A legal segment of every offset there is, 0 to math.MaxInt64, and
	// one inside it listed after it: no count or gap may overflow.
	edge := tp("edge", 0)
	for _, r := range [][2]int64{{0, math.MaxInt64}, {5, 10}} {
		id := rs.RemoteLogSegmentID{TopicIDPartition: edge, ID: uuid.New()}
		require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadata{
			SegmentID: id, StartOffset: r[0], EndOffset: r[1], MaxTimestampMs: now, EventTimestampMs: now,
			SegmentSizeInBytes: math.MaxInt32, State: rs.CopySegmentStarted, SegmentLeaderEpochs: E{0: r[0]},
		}))
		require.NoError(t, m.UpdateRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadataUpdate{SegmentID: id, State: fin, EventTimestampMs: now}))
	}
	put := func(tp rs.TopicIDPartition, states ...rs.RemotePartitionDeleteState) {
		for _, st := range states {
			require.NoError(t, m.PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{
				TopicIDPartition: tp, State: st, BrokerID: 3, EventTimestampMs: now}))
		}
	}
	put(payments, rs.DeletePartitionMarked)
	put(audit, rs.DeletePartitionMarked, rs.DeletePartitionStarted, rs.DeletePartitionFinished)
	// Age the stuck ones (timestamps are not states: the guards let this by).
	_, err = pool.Exec(ctx, `UPDATE rlmm_segments SET created_at = now() - interval '3 hours', updated_at = now() - interval '2 hours'
		WHERE segment_id = ANY($1)`, []uuid.UUID{stuckCopy, stuckDelete})
	require.NoError(t, err)
}
