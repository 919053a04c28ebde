// Package partition holds the reference semantics of a partition's
// segments, which both managers share: InMemoryManager keeps one Partition
// per partition, and so does PgManager's cache (internal/cache). A
// Partition answers API.md's queries (the lookups, the lists, the epochs'
// ends) from an index rebuilt lazily after writes. It knows nothing of how
// its owner keeps it fresh; its owner's lock guards it.
//
// The package does not import the root package: a partition is named by
// TopicIDPartition, whose fields are those of remotestorage.TopicIDPartition
// (the root converts one into the other), and the states are the codes of
// statemachine.go.
package partition

import (
	"cmp"
	"iter"
	"slices"
	"sync"

	"github.com/google/uuid"
)

// The state codes the semantics depend on: those of
// remotestorage.RemoteLogSegmentState and RemotePartitionDeleteState
// (statemachine.go, and the codes stored in the database).
const (
	CopySegmentFinished     int8 = 1  // COPY_SEGMENT_FINISHED: found by the lookups
	DeleteSegmentFinished   int8 = 3  // DELETE_SEGMENT_FINISHED: forgotten
	DeletePartitionFinished int8 = 2  // DELETE_PARTITION_FINISHED: every segment forgotten
	DeleteNone              int8 = -1 // no partition-delete record
)

// Partition holds one partition's segments in memory.
type Partition struct {
	DeleteState int8                   // the partition-delete state; DeleteNone without a record
	segments    map[uuid.UUID]*Segment // the segments not forgotten
	epochEnds   map[int32]int64        // EpochEndOffset's high-water marks (RaiseEpochEnds)
	tp          *TopicIDPartition      // the partition as its first stored segment names it (share)

	indexMu sync.Mutex
	index   *index // nil: stale, rebuilt by the next query
}

// New returns an empty partition without a partition-delete record.
func New() *Partition {
	return &Partition{DeleteState: DeleteNone, segments: make(map[uuid.UUID]*Segment)}
}

// index is an immutable view of a partition built for queries.
type index struct {
	listed   []*Segment // not forgotten, ordered by StartOffset then add order
	finished map[int32][]epochRange
	maxSpan  int64 // the longest epoch range, bounding how far back a lookup scans
}

// epochRange is the range of one epoch inside one finished segment.
type epochRange struct {
	first, last int64
	segment     *Segment
}

// Changed marks the index stale. Callers hold the owner's write lock.
func (p *Partition) Changed() { p.index = nil }

// Segment returns the segment id, nil when the partition holds none.
func (p *Partition) Segment(id uuid.UUID) *Segment { return p.segments[id] }

// Store stores s, replacing what the partition held of its id.
func (p *Partition) Store(s *Segment) {
	p.share(s)
	p.segments[s.ID] = s
}

// Remove forgets segment id.
func (p *Partition) Remove(id uuid.UUID) { delete(p.segments, id) }

// Empty forgets every segment and every epoch's end.
func (p *Partition) Empty() {
	clear(p.segments)
	p.epochEnds = nil
}

// share points s at the partition's TopicIDPartition when s names the
// partition alike (the topic name too), so that segments do not each hold
// a copy.
func (p *Partition) share(s *Segment) {
	switch {
	case p.tp == nil:
		p.tp = s.TP
	case *p.tp == *s.TP:
		s.TP = p.tp
	}
}

// currentIndex returns the index, building it if stale. Callers hold at least
// the owner's read lock; concurrent readers share one build. A nil partition
// has an empty index.
func (p *Partition) currentIndex() *index {
	if p == nil || p.DeleteState == DeletePartitionFinished {
		return &index{}
	}
	p.indexMu.Lock()
	defer p.indexMu.Unlock()
	if p.index != nil {
		return p.index
	}
	// Sized exactly, so the index holds no spare capacity: count first.
	counts := make(map[int32]int)
	for _, s := range p.segments {
		if s.State == CopySegmentFinished {
			for _, e := range s.Epochs {
				counts[e.Epoch]++
			}
		}
	}
	idx := &index{listed: make([]*Segment, 0, len(p.segments)), finished: make(map[int32][]epochRange, len(counts))}
	for e, n := range counts {
		idx.finished[e] = make([]epochRange, 0, n)
	}
	for _, s := range p.segments {
		if s.State == DeleteSegmentFinished {
			continue
		}
		idx.listed = append(idx.listed, s)
		if s.State != CopySegmentFinished {
			continue
		}
		s.EpochRanges(func(e int32, first, last int64) {
			idx.finished[e] = append(idx.finished[e], epochRange{first: first, last: last, segment: s})
			idx.maxSpan = max(idx.maxSpan, last-first)
		})
	}
	slices.SortFunc(idx.listed, func(a, b *Segment) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.AddedVersion, b.AddedVersion))
	})
	for _, ranges := range idx.finished {
		slices.SortFunc(ranges, func(a, b epochRange) int {
			return cmp.Or(cmp.Compare(a.first, b.first), cmp.Compare(a.segment.FinishedVersion, b.segment.FinishedVersion))
		})
	}
	p.index = idx
	return idx
}

// The queries below take a nil partition as an empty one. Callers hold at
// least the owner's read lock.

// Lookup returns the finished segment whose range of epoch contains offset;
// among several, the one whose range starts latest, then the one finished
// last. Only ranges starting in [offset-maxSpan, offset] can hold offset.
func (p *Partition) Lookup(epoch int32, offset int64) *Segment {
	idx := p.currentIndex()
	ranges := idx.finished[epoch]
	i, _ := slices.BinarySearchFunc(ranges, offset, func(r epochRange, o int64) int {
		if r.first <= o {
			return -1
		}
		return 1
	})
	for j := i - 1; j >= 0 && ranges[j].first >= offset-idx.maxSpan; j-- {
		if ranges[j].last >= offset {
			return ranges[j].segment
		}
	}
	return nil
}

// Highest returns the largest EndOffset of the finished segments carrying
// epoch.
func (p *Partition) Highest(epoch int32) (int64, bool) {
	var highest int64
	found := false
	for _, r := range p.currentIndex().finished[epoch] {
		if !found || r.segment.End > highest {
			highest, found = r.segment.End, true
		}
	}
	return highest, found
}

// List yields the segments not forgotten that keep accepts, in list order
// (StartOffset, then the order of adds).
func (p *Partition) List(keep func(*Segment) bool) iter.Seq[*Segment] {
	return filter(p.currentIndex().listed, keep)
}

// ListAfter is List from the first segment after list key (startOffset,
// addedVersion): a binary search in the index, then a scan.
func (p *Partition) ListAfter(startOffset, addedVersion int64, keep func(*Segment) bool) iter.Seq[*Segment] {
	listed := p.currentIndex().listed
	i, found := slices.BinarySearchFunc(listed, [2]int64{startOffset, addedVersion}, func(s *Segment, k [2]int64) int {
		return cmp.Or(cmp.Compare(s.Start, k[0]), cmp.Compare(s.AddedVersion, k[1]))
	})
	if found {
		i++
	}
	return filter(listed[i:], keep)
}

func filter(segments []*Segment, keep func(*Segment) bool) iter.Seq[*Segment] {
	return func(yield func(*Segment) bool) {
		for _, s := range segments {
			if keep(s) && !yield(s) {
				return
			}
		}
	}
}

// Carries returns the filter of the segments that carry epoch.
func Carries(epoch int32) func(*Segment) bool {
	return func(s *Segment) bool {
		return s.Carries(epoch)
	}
}

// All is the filter that accepts every segment.
func All(*Segment) bool { return true }

// NextWithTxnIndex walks the lookups of epoch from offset and returns the
// first segment with a transaction index; nil when the walk misses first.
func (p *Partition) NextWithTxnIndex(epoch int32, offset int64) *Segment {
	for {
		s := p.Lookup(epoch, offset)
		if s == nil || !s.TxnIndexEmpty {
			return s
		}
		if s.End == maxOffset {
			return nil
		}
		offset = s.End + 1
	}
}

const maxOffset = int64(^uint64(0) >> 1)

// FirstForTimestamp returns the first finished segment carrying epoch, in
// list order, whose MaxTimestampMs >= timestampMs and EndOffset >=
// startingOffset; nil when there is none.
func (p *Partition) FirstForTimestamp(epoch int32, timestampMs, startingOffset int64) *Segment {
	for _, s := range p.currentIndex().listed {
		if s.State != CopySegmentFinished || s.End < startingOffset || s.MaxTimestampMs < timestampMs {
			continue
		}
		if s.Carries(epoch) {
			return s
		}
	}
	return nil
}

// RaiseEpochEnds raises the partition's epoch high-water marks to the ends
// of the epoch ranges of s, a segment reaching COPY_SEGMENT_FINISHED.
// Nothing lowers them but Empty; DELETE_PARTITION_FINISHED hides them
// (EpochEnd).
func (p *Partition) RaiseEpochEnds(s *Segment) {
	s.EpochRanges(func(e int32, _, last int64) { p.RaiseEpochEnd(e, last) })
}

// RaiseEpochEnd raises epoch's high-water mark to end.
func (p *Partition) RaiseEpochEnd(epoch int32, end int64) {
	if p.epochEnds == nil {
		p.epochEnds = make(map[int32]int64)
	}
	if old, ok := p.epochEnds[epoch]; !ok || end > old {
		p.epochEnds[epoch] = end
	}
}

// EpochEnd returns the largest offset of epoch in any segment of the
// partition that reached COPY_SEGMENT_FINISHED, deleted since or not; none
// once the partition's delete finished.
func (p *Partition) EpochEnd(epoch int32) (int64, bool) {
	if p == nil || p.DeleteState == DeletePartitionFinished {
		return 0, false
	}
	end, ok := p.epochEnds[epoch]
	return end, ok
}
