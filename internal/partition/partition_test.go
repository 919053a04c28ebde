package partition

import (
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

var tp = TopicIDPartition{TopicID: uuid.MustParse("3b1f6a2c-8d4e-4f5a-9b6c-7d8e9f0a1b2c"), Topic: "t", Partition: 0}

// finished is a COPY_SEGMENT_FINISHED segment of [start, end] whose epochs
// start at the given offsets, added at write order added.
func finished(start, end, added int64, epochs ...EpochStart) *Segment {
	own := tp
	return &Segment{TP: &own, ID: uuid.New(), Start: start, End: end, Epochs: epochs, State: CopySegmentFinished,
		AddedVersion: added, FinishedVersion: added, LastVersion: added, TxnIndexEmpty: true}
}

func ids(seq func(func(*Segment) bool)) []int64 {
	var out []int64
	for s := range seq {
		out = append(out, s.AddedVersion)
	}
	return out
}

func TestLookupsAndLists(t *testing.T) {
	p := New()
	a := finished(0, 99, 1, EpochStart{Epoch: 1, Start: 0})
	b := finished(100, 199, 2, EpochStart{Epoch: 1, Start: 100}, EpochStart{Epoch: 2, Start: 150})
	c := finished(100, 149, 3, EpochStart{Epoch: 1, Start: 100}) // same start as b: list order by add, lookup by finish
	started := finished(200, 299, 4, EpochStart{Epoch: 2, Start: 200})
	started.State = 0
	for _, s := range []*Segment{c, started, a, b} {
		p.Store(s)
	}
	p.Changed()

	require.Same(t, a, p.Lookup(1, 50))
	require.Same(t, c, p.Lookup(1, 120), "among ranges starting alike, the one finished last")
	require.Same(t, b, p.Lookup(2, 160))
	require.Nil(t, p.Lookup(2, 250), "not finished")
	require.Nil(t, p.Lookup(3, 0))
	highest, ok := p.Highest(1)
	require.True(t, ok)
	require.EqualValues(t, 199, highest)

	require.Equal(t, []int64{1, 2, 3, 4}, ids(p.List(All)))
	require.Equal(t, []int64{2, 4}, ids(p.List(Carries(2))))
	require.Equal(t, []int64{3, 4}, ids(p.ListAfter(100, 2, All)), "after a key it holds")
	require.Equal(t, []int64{2, 3, 4}, ids(p.ListAfter(50, 7, All)), "after a key it does not hold")
	require.Same(t, a, p.FirstForTimestamp(1, 0, 0))
	require.Same(t, b, p.FirstForTimestamp(1, 0, 150))

	p.RaiseEpochEnds(b)
	end, ok := p.EpochEnd(1)
	require.True(t, ok)
	require.EqualValues(t, 149, end)

	// Forgotten segments leave the lists; DELETE_PARTITION_FINISHED hides everything.
	p.Remove(a.ID)
	p.Changed()
	require.Nil(t, p.Lookup(1, 50))
	require.False(t, slices.Contains(ids(p.List(All)), 1))
	p.DeleteState = DeletePartitionFinished
	p.Changed()
	require.Empty(t, ids(p.List(All)))
	_, ok = p.EpochEnd(1)
	require.False(t, ok)
}

// A nil partition (nothing written) answers as an empty one.
func TestNilPartitionIsEmpty(t *testing.T) {
	var p *Partition
	require.Nil(t, p.Lookup(0, 0))
	_, ok := p.Highest(0)
	require.False(t, ok)
	require.Empty(t, ids(p.List(All)))
	_, ok = p.EpochEnd(0)
	require.False(t, ok)
}

// NextWithTxnIndex walks the lookups until a segment with a transaction
// index.
func TestNextWithTxnIndex(t *testing.T) {
	p := New()
	a := finished(0, 99, 1, EpochStart{Epoch: 1, Start: 0})
	b := finished(100, 199, 2, EpochStart{Epoch: 1, Start: 100})
	b.TxnIndexEmpty = false
	p.Store(a)
	p.Store(b)
	require.Same(t, b, p.NextWithTxnIndex(1, 10))
	require.Nil(t, p.NextWithTxnIndex(1, 200))
}

// Segments that name the partition alike share one TopicIDPartition.
func TestStoreSharesTheTopicIDPartition(t *testing.T) {
	p := New()
	a, b := finished(0, 9, 1), finished(10, 19, 2)
	p.Store(a)
	p.Store(b)
	require.Same(t, a.TP, b.TP)
}
