package cache

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage/internal/partition"
)

func segmentAt(id uuid.UUID, state int8, lastVersion int64) *partition.Segment {
	tp := partition.TopicIDPartition{TopicID: uuid.MustParse("0d6c2a5e-3f7b-4e1a-8c9d-1b2a3c4d5e6f"), Topic: "t", Partition: 0}
	return &partition.Segment{TP: tp, ID: id, State: state, LastVersion: lastVersion}
}

// Put keeps the newest write of each segment; a forgotten segment leaves a
// tombstone that keeps an older row out until the snapshot sees the write
// that forgot it.
func TestDataPutKeepsTheNewestWrite(t *testing.T) {
	d := newData()
	id := uuid.New()
	d.Put(segmentAt(id, 0, 2), 20)
	d.Put(segmentAt(id, 0, 1), 10) // older: dropped
	held, ok := d.Segment(id)
	require.True(t, ok)
	require.EqualValues(t, 2, held.LastVersion())
	require.True(t, d.holdsWrite(id, 2))
	require.False(t, d.holdsWrite(id, 3))

	d.Put(segmentAt(id, partition.DeleteSegmentFinished, 3), 30)
	_, ok = d.Segment(id)
	require.False(t, ok, "forgotten")
	require.True(t, d.holdsWrite(id, 3), "the tombstone holds the write that forgot it")
	d.Put(segmentAt(id, 1, 2), 20) // a catch-up in flight brings an older row
	_, ok = d.Segment(id)
	require.False(t, ok, "the tombstone keeps it out")

	before, err := parseSnapshot("25:30:")
	require.NoError(t, err)
	d.pruneForgotten(before) // does not see 30 yet
	require.True(t, d.holdsWrite(id, 3))
	after, err := parseSnapshot("31:31:")
	require.NoError(t, err)
	d.pruneForgotten(after)
	require.False(t, d.holdsWrite(id, 3), "pruned once the snapshot sees the write")
}

// The delete record keeps the newest write; a purge takes it with every
// segment and epoch end.
func TestDataDeleteState(t *testing.T) {
	d := newData()
	d.PutDeleteState(0, 5)
	d.PutDeleteState(1, 4) // older: dropped
	require.EqualValues(t, 0, d.DeleteState)
	require.EqualValues(t, 5, d.DeleteVersion())
	d.PutDeleteState(partition.DeletePartitionFinished, 6)
	require.Equal(t, partition.DeletePartitionFinished, d.DeleteState)

	s := segmentAt(uuid.New(), partition.CopySegmentFinished, 1)
	s.Epochs = []partition.EpochStart{{Epoch: 1, Start: 0}}
	d.Put(s, 1)
	d.RaiseEpochEnds(s)
	d.Purged(7)
	require.Equal(t, partition.DeleteNone, d.DeleteState)
	require.EqualValues(t, 7, d.DeleteVersion())
	_, ok := d.Segment(s.ID)
	require.False(t, ok)
	_, ok = d.EpochEnd(1)
	require.False(t, ok)
}
