package partition

import (
	"iter"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

var tp = TopicIDPartition{TopicID: uuid.MustParse("3b1f6a2c-8d4e-4f5a-9b6c-7d8e9f0a1b2c"), Topic: "t", Partition: 0}

// finished is a COPY_SEGMENT_FINISHED segment of [start, end] whose epochs
// start at the given offsets, added at write order added.
func finished(start, end, added int64, epochs ...EpochStart) *Segment {
	return &Segment{TP: tp, ID: uuid.New(), Start: start, End: end, Epochs: epochs, State: CopySegmentFinished,
		AddedVersion: added, FinishedVersion: added, LastVersion: added, TxnIndexEmpty: true}
}

func ids(seq iter.Seq[Ref]) []int64 {
	var out []int64
	for r := range seq {
		out = append(out, r.AddedVersion())
	}
	return out
}

// requireFound requires that a query found segment want.
func requireFound(t *testing.T, want *Segment, got Ref, found bool, msgAndArgs ...any) {
	t.Helper()
	require.True(t, found, msgAndArgs...)
	require.Equal(t, want.ID, got.ID(), msgAndArgs...)
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

	r, ok := p.Lookup(1, 50)
	requireFound(t, a, r, ok)
	r, ok = p.Lookup(1, 120)
	requireFound(t, c, r, ok, "among ranges starting alike, the one finished last")
	r, ok = p.Lookup(2, 160)
	requireFound(t, b, r, ok)
	_, ok = p.Lookup(2, 250)
	require.False(t, ok, "not finished")
	_, ok = p.Lookup(3, 0)
	require.False(t, ok)
	highest, ok := p.Highest(1)
	require.True(t, ok)
	require.EqualValues(t, 199, highest)

	require.Equal(t, []int64{1, 2, 3, 4}, ids(p.List(All)))
	require.Equal(t, []int64{2, 4}, ids(p.List(Carries(2))))
	require.Equal(t, []int64{3, 4}, ids(p.ListAfter(100, 2, All)), "after a key it holds")
	require.Equal(t, []int64{2, 3, 4}, ids(p.ListAfter(50, 7, All)), "after a key it does not hold")
	r, ok = p.FirstForTimestamp(1, 0, 0)
	requireFound(t, a, r, ok)
	r, ok = p.FirstForTimestamp(1, 0, 150)
	requireFound(t, b, r, ok)

	p.RaiseEpochEnds(b)
	end, ok := p.EpochEnd(1)
	require.True(t, ok)
	require.EqualValues(t, 149, end)

	// Forgotten segments leave the lists; DELETE_PARTITION_FINISHED hides everything.
	p.Remove(a.ID)
	_, ok = p.Lookup(1, 50)
	require.False(t, ok)
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
	_, ok := p.Lookup(0, 0)
	require.False(t, ok)
	_, ok = p.Highest(0)
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
	r, ok := p.NextWithTxnIndex(1, 10)
	requireFound(t, b, r, ok)
	_, ok = p.NextWithTxnIndex(1, 200)
	require.False(t, ok)
}

// The partition holds its TopicIDPartition once; a segment that names the
// partition otherwise (another topic name) keeps its own, until a write
// names it alike again.
func TestTopicIDPartitionHeldOnce(t *testing.T) {
	p := New()
	a, b := finished(0, 9, 1), finished(10, 19, 2)
	p.Store(a)
	p.Store(b)
	require.Empty(t, p.ownTP)
	renamed := tp
	renamed.Topic = "renamed"
	b.TP = renamed
	p.Store(b)
	rb, ok := p.Segment(b.ID)
	require.True(t, ok)
	require.Equal(t, renamed, rb.TopicIDPartition())
	ra, _ := p.Segment(a.ID)
	require.Equal(t, tp, ra.TopicIDPartition())
	require.Len(t, p.ownTP, 1)
	b.TP = tp
	p.Store(b)
	rb, _ = p.Segment(b.ID)
	require.Equal(t, tp, rb.TopicIDPartition())
	require.Empty(t, p.ownTP)
}

// A Ref gives back every field stored, CustomMetadata's nil and empty
// apart; a write replaces them all, epochs included.
func TestStoreRoundTrip(t *testing.T) {
	p := New()
	s := &Segment{TP: tp, ID: uuid.New(), Start: 5, End: 1 << 40, MaxTimestampMs: -1, EventTimestampMs: 1_700_000_000_000,
		BrokerID: -3, SizeInBytes: 1 << 30, CustomMetadata: []byte{0, 1}, Epochs: []EpochStart{{Epoch: 0, Start: 5}, {Epoch: 7, Start: 1 << 39}},
		State: 2, TxnIndexEmpty: true, AddedVersion: 1, FinishedVersion: 1 << 62, LastVersion: 1<<62 + 1}
	p.Store(s)
	r, ok := p.Segment(s.ID)
	require.True(t, ok)
	require.Equal(t, *s, r.Segment())
	s.CustomMetadata = []byte{}
	s.Epochs = []EpochStart{{Epoch: 3, Start: 5}}
	s.State, s.TxnIndexEmpty = 3, false
	p.Store(s)
	r, _ = p.Segment(s.ID)
	require.Equal(t, *s, r.Segment())
	require.NotNil(t, r.CustomMetadata(), "empty, not none")
	s.CustomMetadata = []byte("held as a copy")
	p.Store(s)
	s.CustomMetadata[0] = 'X'
	r, _ = p.Segment(s.ID)
	require.Equal(t, "held as a copy", string(r.CustomMetadata()))
	s.CustomMetadata = []byte{}
	s.CustomMetadata = nil
	p.Store(s)
	r, _ = p.Segment(s.ID)
	require.Equal(t, *s, r.Segment())
	require.Equal(t, 1, p.Len())
	require.Equal(t, 0, p.customAt.len(), "compacted: no custom metadata left, no column")
	require.Empty(t, p.customs)
}

// The lookup path allocates nothing.
func TestLookupsDoNotAllocate(t *testing.T) {
	p := benchPartition(1000)
	id := ids(p.List(All)) // builds the index
	require.Len(t, id, 1000)
	r, _ := p.Lookup(0, 50)
	allocs := testing.AllocsPerRun(100, func() {
		p.Lookup(int32(5), 55_555)
		p.Highest(3)
		p.NextWithTxnIndex(1, 12_345)
		p.FirstForTimestamp(2, 0, 20_000)
		p.Segment(r.ID())
		p.EpochEnd(1)
		r.TopicIDPartition()
		r.CustomMetadata()
		r.Carries(0)
	})
	require.Zero(t, allocs)
}
