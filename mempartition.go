package remotestorage

import (
	"cmp"
	"slices"
	"sync"

	"github.com/google/uuid"
)

// memPartition holds one partition's segments in memory. InMemoryManager
// keeps one per partition, and so does PgManager's cache; the queries below
// are the reference semantics of API.md, answered from an index rebuilt
// lazily after writes.
type memPartition struct {
	version       int64 // bumped by every write to the partition
	deleteState   RemotePartitionDeleteState
	deleteVersion int64                     // the version deleteState is known at (PgManager's cache)
	segments      map[uuid.UUID]*memSegment // the segments not forgotten
	// forgotten holds, in PgManager's cache, the segments forgotten at a
	// version the cache does not cover yet (id -> that version), so that
	// an older row from a catch-up in flight cannot bring one back. Pruned
	// once the cached version covers them; InMemoryManager keeps none.
	forgotten map[uuid.UUID]int64
	epochEnds map[LeaderEpoch]int64 // EpochEndOffset's high-water marks (mempartition_kafka.go)

	indexMu sync.Mutex
	index   *partitionIndex // nil: stale, rebuilt by the next query
}

type memSegment struct {
	meta            RemoteLogSegmentMetadata
	addedVersion    int64
	finishedVersion int64 // partition version of the first COPY_SEGMENT_FINISHED; 0: never finished
	lastVersion     int64 // partition version of the latest write to the segment
}

// partitionIndex is an immutable view of a partition built for queries.
type partitionIndex struct {
	listed   []*memSegment // not forgotten, ordered by StartOffset then add order
	finished map[LeaderEpoch][]epochRange
	maxSpan  int64 // the longest epoch range, bounding how far back a lookup scans
}

// epochRange is the range of one epoch inside one finished segment.
type epochRange struct {
	first, last int64
	segment     *memSegment
}

func newMemPartition() *memPartition {
	return &memPartition{deleteState: partitionDeleteNone, segments: make(map[uuid.UUID]*memSegment), forgotten: make(map[uuid.UUID]int64)}
}

// changed marks the index stale. Callers hold the owner's write lock.
func (p *memPartition) changed() { p.index = nil }

// currentIndex returns the index, building it if stale. Callers hold at least
// the owner's read lock; concurrent readers share one build.
func (p *memPartition) currentIndex() *partitionIndex {
	if p == nil || p.deleteState == DeletePartitionFinished {
		return &partitionIndex{}
	}
	p.indexMu.Lock()
	defer p.indexMu.Unlock()
	if p.index != nil {
		return p.index
	}
	idx := &partitionIndex{finished: make(map[LeaderEpoch][]epochRange)}
	for _, s := range p.segments {
		if s.meta.State == DeleteSegmentFinished {
			continue
		}
		idx.listed = append(idx.listed, s)
		if s.meta.State != CopySegmentFinished {
			continue
		}
		for e := range s.meta.SegmentLeaderEpochs {
			first, last, _ := s.meta.epochRange(e)
			idx.finished[e] = append(idx.finished[e], epochRange{first: first, last: last, segment: s})
			idx.maxSpan = max(idx.maxSpan, last-first)
		}
	}
	slices.SortFunc(idx.listed, func(a, b *memSegment) int {
		return cmp.Or(cmp.Compare(a.meta.StartOffset, b.meta.StartOffset), cmp.Compare(a.addedVersion, b.addedVersion))
	})
	for _, ranges := range idx.finished {
		slices.SortFunc(ranges, func(a, b epochRange) int {
			return cmp.Or(cmp.Compare(a.first, b.first), cmp.Compare(a.segment.finishedVersion, b.segment.finishedVersion))
		})
	}
	p.index = idx
	return idx
}

// lookup returns the finished segment whose range of epoch contains offset;
// among several, the one whose range starts latest, then the one finished
// last. Only ranges starting in [offset-maxSpan, offset] can hold offset.
func (p *memPartition) lookup(epoch LeaderEpoch, offset int64) *memSegment {
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

// highest returns the largest EndOffset of the finished segments carrying
// epoch.
func (p *memPartition) highest(epoch LeaderEpoch) (int64, bool) {
	var highest int64
	found := false
	for _, r := range p.currentIndex().finished[epoch] {
		if !found || r.segment.meta.EndOffset > highest {
			highest, found = r.segment.meta.EndOffset, true
		}
	}
	return highest, found
}

// list returns copies of the segments not forgotten that keep accepts, in
// list order.
func (p *memPartition) list(keep func(*memSegment) bool) []RemoteLogSegmentMetadata {
	var out []RemoteLogSegmentMetadata
	for _, s := range p.currentIndex().listed {
		if keep(s) {
			out = append(out, s.meta.clone())
		}
	}
	return out
}

func carries(epoch LeaderEpoch) func(*memSegment) bool {
	return func(s *memSegment) bool {
		_, ok := s.meta.SegmentLeaderEpochs[epoch]
		return ok
	}
}

func all(*memSegment) bool { return true }

// nextWithTxnIndex walks the lookups of epoch from offset and returns the
// first segment with a transaction index; nil when the walk misses first.
func (p *memPartition) nextWithTxnIndex(epoch LeaderEpoch, offset int64) *memSegment {
	for {
		s := p.lookup(epoch, offset)
		if s == nil || !s.meta.TxnIndexEmpty {
			return s
		}
		if s.meta.EndOffset == maxOffset {
			return nil
		}
		offset = s.meta.EndOffset + 1
	}
}

const maxOffset = int64(^uint64(0) >> 1)

// put stores the cache's copy of a write to s, unless the partition already
// holds a newer write of the segment. A forgotten segment leaves memory.
// The cache holds every write up to p.version, so a segment that is absent
// although its row is not newer than p.version was forgotten since: the
// row is older news and is dropped.
func (p *memPartition) put(s *memSegment) {
	id := s.meta.SegmentID.ID
	if old := p.segments[id]; old != nil {
		if old.lastVersion > s.lastVersion {
			return
		}
	} else if v, gone := p.forgotten[id]; (gone && v >= s.lastVersion) || s.lastVersion <= p.version {
		return
	}
	if s.meta.State == DeleteSegmentFinished {
		delete(p.segments, id)
		p.forgotten[id] = s.lastVersion
		return
	}
	p.segments[id] = s
}

// pruneForgotten drops the tombstones the cached version covers.
func (p *memPartition) pruneForgotten() {
	for id, v := range p.forgotten {
		if v <= p.version {
			delete(p.forgotten, id)
		}
	}
}
