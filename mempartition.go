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
	version       int64 // InMemoryManager's: bumped by every write to the partition
	deleteState   RemotePartitionDeleteState
	deleteVersion int64                     // the write order of deleteState (PgManager's cache)
	segments      map[uuid.UUID]*memSegment // the segments not forgotten
	// forgotten holds, in PgManager's cache, the segments forgotten by a
	// write that the cache's snapshot does not see yet, so that an older
	// row from a catch-up in flight cannot bring one back. Pruned once the
	// snapshot sees them; InMemoryManager keeps none.
	forgotten map[uuid.UUID]tombstone
	epochEnds map[LeaderEpoch]int64 // EpochEndOffset's high-water marks (raiseEpochEnds)
	tp        *TopicIDPartition     // the partition as its first stored segment names it (share)

	indexMu sync.Mutex
	index   *partitionIndex // nil: stale, rebuilt by the next query
}

type memSegment struct {
	// RemoteLogSegmentMetadata's fields, laid out compactly (a cache holds
	// millions): the partition is shared by the partition's segments that
	// name it alike (memPartition.share), and the epoch map is a slice
	// sorted by epoch (a Go map costs about 200 bytes even for one entry;
	// the slice costs 16 per epoch). public() rebuilds the caller's form.
	tp                    *TopicIDPartition
	id                    uuid.UUID
	start, end            int64 // inclusive
	maxTimestampMs        int64
	eventTimestampMs      int64
	brokerID, sizeInBytes int32
	customMetadata        []byte
	epochs                []epochStart
	state                 RemoteLogSegmentState
	txnIndexEmpty         bool
	addedVersion          int64 // the write order of the add
	finishedVersion       int64 // the write order of the first COPY_SEGMENT_FINISHED; 0: never finished
	lastVersion           int64 // the order of the latest write among the segment's writes
}

// tombstone is a forgotten segment in PgManager's cache: the lastVersion
// of the write that forgot it, and that write's transaction id.
type tombstone struct {
	lastVersion int64
	xid         uint64
}

// epochStart is one entry of a segment's epoch map.
type epochStart struct {
	epoch LeaderEpoch
	start int64
}

// newMemSegment stores meta (which it takes over: pass a copy the caller
// keeps no reference to) with its epoch map compacted.
func newMemSegment(meta RemoteLogSegmentMetadata, addedVersion, finishedVersion, lastVersion int64) *memSegment {
	tp := meta.SegmentID.TopicIDPartition
	s := &memSegment{
		tp: &tp, id: meta.SegmentID.ID, start: meta.StartOffset, end: meta.EndOffset,
		maxTimestampMs: meta.MaxTimestampMs, eventTimestampMs: meta.EventTimestampMs,
		brokerID: meta.BrokerID, sizeInBytes: meta.SegmentSizeInBytes, customMetadata: meta.CustomMetadata,
		state: meta.State, txnIndexEmpty: meta.TxnIndexEmpty,
		addedVersion: addedVersion, finishedVersion: finishedVersion, lastVersion: lastVersion,
	}
	s.epochs = make([]epochStart, 0, len(meta.SegmentLeaderEpochs))
	for _, e := range meta.sortedEpochs() {
		s.epochs = append(s.epochs, epochStart{epoch: e, start: meta.SegmentLeaderEpochs[e]})
	}
	return s
}

// public returns a copy of the segment as callers see it, epoch map included.
func (s *memSegment) public() RemoteLogSegmentMetadata {
	m := RemoteLogSegmentMetadata{
		SegmentID:   RemoteLogSegmentID{TopicIDPartition: *s.tp, ID: s.id},
		StartOffset: s.start, EndOffset: s.end, MaxTimestampMs: s.maxTimestampMs,
		BrokerID: s.brokerID, EventTimestampMs: s.eventTimestampMs, SegmentSizeInBytes: s.sizeInBytes,
		CustomMetadata: cloneBytes(s.customMetadata), State: s.state, TxnIndexEmpty: s.txnIndexEmpty,
		SegmentLeaderEpochs: make(map[LeaderEpoch]int64, len(s.epochs)),
	}
	for _, e := range s.epochs {
		m.SegmentLeaderEpochs[e.epoch] = e.start
	}
	return m
}

// carries reports whether the segment carries epoch.
func (s *memSegment) carries(epoch LeaderEpoch) bool {
	for _, e := range s.epochs {
		if e.epoch == epoch {
			return true
		}
	}
	return false
}

// epochRanges yields the range [first, last] of each epoch of the segment.
func (s *memSegment) epochRanges(yield func(epoch LeaderEpoch, first, last int64)) {
	for i, e := range s.epochs {
		last := s.end
		if i+1 < len(s.epochs) {
			last = s.epochs[i+1].start - 1
		}
		yield(e.epoch, e.start, last)
	}
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
	return &memPartition{deleteState: partitionDeleteNone, segments: make(map[uuid.UUID]*memSegment), forgotten: make(map[uuid.UUID]tombstone)}
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
	// Sized exactly, so the index holds no spare capacity: count first.
	counts := make(map[LeaderEpoch]int)
	for _, s := range p.segments {
		if s.state == CopySegmentFinished {
			for _, e := range s.epochs {
				counts[e.epoch]++
			}
		}
	}
	idx := &partitionIndex{listed: make([]*memSegment, 0, len(p.segments)), finished: make(map[LeaderEpoch][]epochRange, len(counts))}
	for e, n := range counts {
		idx.finished[e] = make([]epochRange, 0, n)
	}
	for _, s := range p.segments {
		if s.state == DeleteSegmentFinished {
			continue
		}
		idx.listed = append(idx.listed, s)
		if s.state != CopySegmentFinished {
			continue
		}
		s.epochRanges(func(e LeaderEpoch, first, last int64) {
			idx.finished[e] = append(idx.finished[e], epochRange{first: first, last: last, segment: s})
			idx.maxSpan = max(idx.maxSpan, last-first)
		})
	}
	slices.SortFunc(idx.listed, func(a, b *memSegment) int {
		return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.addedVersion, b.addedVersion))
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
		if !found || r.segment.end > highest {
			highest, found = r.segment.end, true
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
			out = append(out, s.public())
		}
	}
	return out
}

func carries(epoch LeaderEpoch) func(*memSegment) bool {
	return func(s *memSegment) bool {
		return s.carries(epoch)
	}
}

func all(*memSegment) bool { return true }

// nextWithTxnIndex walks the lookups of epoch from offset and returns the
// first segment with a transaction index; nil when the walk misses first.
func (p *memPartition) nextWithTxnIndex(epoch LeaderEpoch, offset int64) *memSegment {
	for {
		s := p.lookup(epoch, offset)
		if s == nil || !s.txnIndexEmpty {
			return s
		}
		if s.end == maxOffset {
			return nil
		}
		offset = s.end + 1
	}
}

const maxOffset = int64(^uint64(0) >> 1)

// put stores the cache's copy of a write to s, made in transaction xid,
// unless the partition already holds a newer write of the segment. A
// forgotten segment leaves memory, and leaves a tombstone.
func (p *memPartition) put(s *memSegment, xid uint64) {
	id := s.id
	if !p.newer(id, s.lastVersion) {
		return
	}
	if s.state == DeleteSegmentFinished {
		delete(p.segments, id)
		p.forgotten[id] = tombstone{lastVersion: s.lastVersion, xid: xid}
		return
	}
	p.share(s)
	p.segments[id] = s
}

// newer reports whether a write of segment id at lastVersion is newer than
// what the partition holds of it.
func (p *memPartition) newer(id uuid.UUID, lastVersion int64) bool {
	if old := p.segments[id]; old != nil {
		return old.lastVersion < lastVersion
	}
	t, gone := p.forgotten[id]
	return !gone || t.lastVersion < lastVersion
}

// holdsWrite reports whether the partition holds the write of segment id
// at lastVersion, or a newer one.
func (p *memPartition) holdsWrite(id uuid.UUID, lastVersion int64) bool {
	if old := p.segments[id]; old != nil {
		return old.lastVersion >= lastVersion
	}
	t, gone := p.forgotten[id]
	return gone && t.lastVersion >= lastVersion
}

// share points s at the partition's TopicIDPartition when s names the
// partition alike (the topic name too), so that segments do not each hold
// a copy.
func (p *memPartition) share(s *memSegment) {
	switch {
	case p.tp == nil:
		p.tp = s.tp
	case *p.tp == *s.tp:
		s.tp = p.tp
	}
}

// pruneForgotten drops the tombstones that the cache's snapshot after
// sees: no catch-up brings an older row of theirs any more.
func (p *memPartition) pruneForgotten(after snapshot) {
	for id, t := range p.forgotten {
		if after.sees(t.xid) {
			delete(p.forgotten, id)
		}
	}
}

// The in-memory answers of FirstSegmentForTimestamp and EpochEndOffset,
// shared by InMemoryManager and PgManager's cache.

// firstForTimestamp returns the first finished segment carrying epoch, in
// list order, whose MaxTimestampMs >= timestampMs and EndOffset >=
// startingOffset; nil when there is none.
func (p *memPartition) firstForTimestamp(epoch LeaderEpoch, timestampMs, startingOffset int64) *memSegment {
	for _, s := range p.currentIndex().listed {
		if s.state != CopySegmentFinished || s.end < startingOffset || s.maxTimestampMs < timestampMs {
			continue
		}
		if s.carries(epoch) {
			return s
		}
	}
	return nil
}

// raiseEpochEnds raises the partition's epoch high-water marks to the ends of
// the epoch ranges of s, a segment reaching COPY_SEGMENT_FINISHED. Nothing
// lowers them; DELETE_PARTITION_FINISHED hides them (epochEnd).
func (p *memPartition) raiseEpochEnds(s *memSegment) {
	s.epochRanges(func(e LeaderEpoch, _, last int64) { p.raiseEpochEnd(e, last) })
}

// raiseEpochEnd raises epoch's high-water mark to end.
func (p *memPartition) raiseEpochEnd(epoch LeaderEpoch, end int64) {
	if p.epochEnds == nil {
		p.epochEnds = make(map[LeaderEpoch]int64)
	}
	if old, ok := p.epochEnds[epoch]; !ok || end > old {
		p.epochEnds[epoch] = end
	}
}

// epochEnd returns the largest offset of epoch in any segment of the
// partition that reached COPY_SEGMENT_FINISHED, deleted since or not; none
// once the partition's delete finished.
func (p *memPartition) epochEnd(epoch LeaderEpoch) (int64, bool) {
	if p == nil || p.deleteState == DeletePartitionFinished {
		return 0, false
	}
	end, ok := p.epochEnds[epoch]
	return end, ok
}
