package partition

import (
	"cmp"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// model is the reference the packed partition is held to: whole segments,
// and each query computed from API.md's definition, by brute force.
type model struct {
	segments    map[uuid.UUID]Segment
	epochEnds   map[int32]int64
	deleteState int8
}

func (m *model) live() []Segment {
	if m.deleteState == DeletePartitionFinished {
		return nil
	}
	out := make([]Segment, 0, len(m.segments))
	for _, s := range m.segments {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Segment) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.AddedVersion, b.AddedVersion))
	})
	return out
}

// lookup is the lookup among live, the model's live segments.
func lookup(live []Segment, epoch int32, offset int64) (Segment, bool) {
	var best Segment
	var bestFirst int64
	found := false
	for _, s := range live {
		if s.State != CopySegmentFinished {
			continue
		}
		s.EpochRanges(func(e int32, first, last int64) {
			if e == epoch && first <= offset && offset <= last &&
				(!found || first > bestFirst || first == bestFirst && s.FinishedVersion > best.FinishedVersion) {
				best, bestFirst, found = s, first, true
			}
		})
	}
	return best, found
}

// normal is s as a Ref gives it back.
func normal(s Segment) Segment {
	if s.Epochs == nil {
		s.Epochs = []EpochStart{}
	}
	return s
}

func segments(seq func(func(Ref) bool)) []Segment {
	out := []Segment{}
	for r := range seq {
		out = append(out, r.Segment())
	}
	return out
}

func normals(list []Segment) []Segment {
	out := []Segment{}
	for _, s := range list {
		out = append(out, normal(s))
	}
	return out
}

// A packed partition answers every query as the model does, under random
// stores, rewrites, removals (and the compactions they cause), empties and
// partition deletes, with values that keep the columns narrow or make them
// wide.
func TestPartitionAgainstModel(t *testing.T) {
	for seed := range uint64(36) {
		rng := rand.New(rand.NewPCG(seed, 2))
		p := New()
		m := &model{segments: map[uuid.UUID]Segment{}, epochEnds: map[int32]int64{}, deleteState: DeleteNone}
		offsetBase := []int64{0, 1 << 40, 1 << 33}[seed%3]
		offsetStride := []int64{10, 1 << 28}[seed%2]
		versionStride := []int64{1, 1 << 27}[(seed/2)%2]
		version := []int64{0, 1 << 50}[(seed/3)%2]
		nextVersion := func() int64 { version += 1 + rng.Int64N(versionStride); return version }
		names := []TopicIDPartition{tp, {TopicID: tp.TopicID, Topic: "other", Partition: 0}}
		timestamp := func() int64 {
			switch rng.IntN(6) {
			case 0:
				return 0
			case 1:
				return []int64{math.MinInt64, math.MaxInt64, -1}[rng.IntN(3)]
			default:
				return 1_700_000_000_000 + rng.Int64N(1<<(10+seed%30))
			}
		}
		custom := func() []byte {
			switch rng.IntN(4) {
			case 0:
				return []byte{}
			case 1:
				return []byte{byte(rng.IntN(256)), 'x'}
			default:
				return nil
			}
		}
		epochs := func(start, end int64) []EpochStart {
			n := rng.IntN(4) // none too: the partition does not validate
			var out []EpochStart
			at, epoch := start, int32(rng.IntN(6))
			for range n {
				if at > end {
					break
				}
				out = append(out, EpochStart{Epoch: epoch, Start: at})
				epoch += 1 + int32(rng.IntN(2))
				at += 1 + rng.Int64N(max(1, (end-start)/2))
			}
			return out
		}
		newSegment := func() Segment {
			start := offsetBase + rng.Int64N(40)*offsetStride
			end := start + rng.Int64N(3*offsetStride)
			added := nextVersion()
			s := Segment{TP: names[rng.IntN(8)/7], ID: uuid.New(), Start: start, End: end,
				MaxTimestampMs: timestamp(), EventTimestampMs: timestamp(), BrokerID: rng.Int32N(5), SizeInBytes: rng.Int32(),
				CustomMetadata: custom(), Epochs: epochs(start, end), State: int8(rng.IntN(3)), TxnIndexEmpty: rng.IntN(3) != 0,
				AddedVersion: added, LastVersion: added}
			if s.State != 0 {
				s.FinishedVersion = nextVersion()
				s.LastVersion = s.FinishedVersion
			}
			return s
		}
		store := func(s Segment) {
			m.segments[s.ID] = s
			c := s
			c.Epochs = slices.Clone(s.Epochs)
			p.Store(&c)
		}
		anyID := func() uuid.UUID {
			for id := range m.segments {
				return id
			}
			return uuid.New()
		}
		for step := range 1500 {
			switch op := rng.IntN(100); {
			case op < 40 || len(m.segments) == 0:
				store(newSegment())
			case op < 65:
				s, ok := m.segments[anyID()]
				if !ok {
					continue
				}
				s.State = int8(rng.IntN(3))
				if s.State == CopySegmentFinished && s.FinishedVersion == 0 {
					s.FinishedVersion = nextVersion()
				}
				s.LastVersion = nextVersion()
				s.BrokerID, s.EventTimestampMs, s.CustomMetadata = rng.Int32N(5), timestamp(), custom()
				if rng.IntN(10) == 0 {
					s.Epochs, s.TP = epochs(s.Start, s.End), names[rng.IntN(2)]
				}
				store(s)
			case op < 90:
				id := anyID()
				if rng.IntN(10) == 0 {
					id = uuid.New()
				}
				delete(m.segments, id)
				p.Remove(id)
			case op < 95:
				e, end := int32(rng.IntN(8)), offsetBase+rng.Int64N(50)*offsetStride
				if old, ok := m.epochEnds[e]; !ok || end > old {
					m.epochEnds[e] = end
				}
				p.RaiseEpochEnd(e, end)
			case op < 97:
				p.Reserve(rng.IntN(50))
			case op < 98:
				clear(m.segments)
				clear(m.epochEnds)
				p.Empty()
			default:
				m.deleteState = []int8{DeleteNone, 0, DeletePartitionFinished}[rng.IntN(3)]
				p.DeleteState = m.deleteState
				p.Changed()
			}
			require.Equal(t, len(m.segments), p.Len())
			if step%7 != 0 {
				continue
			}
			live := m.live()
			require.Equal(t, normals(live), segments(p.List(All)), "seed %d step %d: the list", seed, step)
			for id, s := range m.segments {
				r, ok := p.Segment(id)
				require.True(t, ok)
				require.Equal(t, normal(s), r.Segment())
			}
			_, ok := p.Segment(uuid.New())
			require.False(t, ok)
			for e := range int32(9) {
				var carrying []Segment
				for _, s := range live {
					if s.Carries(e) {
						carrying = append(carrying, s)
					}
				}
				require.Equal(t, normals(carrying), segments(p.List(Carries(e))), "seed %d step %d: the list of epoch %d", seed, step, e)
				var highest int64
				found := false
				for _, s := range carrying {
					if s.State == CopySegmentFinished && (!found || s.End > highest) {
						highest, found = s.End, true
					}
				}
				got, gotFound := p.Highest(e)
				require.Equal(t, [2]any{found, highest}, [2]any{gotFound, got}, "seed %d step %d: highest of epoch %d", seed, step, e)
				end, ok := m.epochEnds[e]
				if m.deleteState == DeletePartitionFinished {
					end, ok = 0, false
				}
				gotEnd, gotOK := p.EpochEnd(e)
				require.Equal(t, [2]any{ok, end}, [2]any{gotOK, gotEnd})
				for range 8 {
					offset := offsetBase + rng.Int64N(45*offsetStride) - offsetStride
					want, found := lookup(live, e, offset)
					r, ok := p.Lookup(e, offset)
					require.Equal(t, found, ok, "seed %d step %d: lookup of %d in epoch %d", seed, step, offset, e)
					if found {
						require.Equal(t, want.ID, r.ID(), "seed %d step %d: lookup of %d in epoch %d", seed, step, offset, e)
					}
					// The walk of NextWithTxnIndex, lookup by lookup.
					next, nextFound := uuid.Nil, false
					for at := offset; ; {
						s, ok := lookup(live, e, at)
						if !ok {
							break
						}
						if !s.TxnIndexEmpty {
							next, nextFound = s.ID, true
							break
						}
						at = s.End + 1
					}
					r, ok = p.NextWithTxnIndex(e, offset)
					require.Equal(t, nextFound, ok)
					if ok {
						require.Equal(t, next, r.ID())
					}
					ts := timestamp()
					first, firstFound := uuid.Nil, false
					for _, s := range carrying {
						if s.State == CopySegmentFinished && s.MaxTimestampMs >= ts && s.End >= offset {
							first, firstFound = s.ID, true
							break
						}
					}
					r, ok = p.FirstForTimestamp(e, ts, offset)
					require.Equal(t, firstFound, ok)
					if ok {
						require.Equal(t, first, r.ID())
					}
				}
			}
			// ListAfter from the key of listed segments, and from a key held by none.
			for range min(len(live), 4) {
				i := rng.IntN(len(live))
				require.Equal(t, normals(live[i+1:]), segments(p.ListAfter(live[i].Start, live[i].AddedVersion, All)))
			}
			key := offsetBase + rng.Int64N(40)*offsetStride
			var after []Segment
			for _, s := range live {
				if s.Start > key || s.Start == key && s.AddedVersion > -1 {
					after = append(after, s)
				}
			}
			require.Equal(t, normals(after), segments(p.ListAfter(key, -1, All)))
		}
	}
}

// A packed segment of one epoch, its index and id table included, costs
// well under 100 bytes of heap.
func TestPackedSegmentSize(t *testing.T) {
	const n = 100_000
	ss := make([]Segment, n)
	for i := range int64(n) {
		ss[i] = Segment{TP: tp, ID: uuid.New(), Start: 100 * i, End: 100*i + 99, MaxTimestampMs: 1_700_000_000_000 + i,
			BrokerID: 1, SizeInBytes: 1000, Epochs: []EpochStart{{Epoch: int32(i / 100), Start: 100 * i}}, State: CopySegmentFinished,
			TxnIndexEmpty: true, AddedVersion: 2*i + 1, FinishedVersion: 2*i + 2, LastVersion: 2*i + 2}
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	p := New()
	p.Reserve(n)
	for i := range ss {
		p.Store(&ss[i])
	}
	_, ok := p.Lookup(5, 50_050) // builds the index
	require.True(t, ok)
	runtime.GC()
	runtime.ReadMemStats(&after)
	perSegment := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%.1f bytes a segment", perSegment)
	require.Less(t, perSegment, 100.0)
	runtime.KeepAlive(p)
	runtime.KeepAlive(ss)
}
