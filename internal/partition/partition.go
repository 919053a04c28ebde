// Package partition holds the reference semantics of a partition's
// segments, which both managers share: InMemoryManager keeps one Partition
// per partition, and so does PgManager's cache (internal/cache). A
// Partition answers API.md's queries (the lookups, the lists, the epochs'
// ends) from an index rebuilt lazily after writes. It knows nothing of how
// its owner keeps it fresh; its owner's lock guards it.
//
// A cache holds millions of segments, so a partition keeps them packed
// (about 90 bytes a segment of one epoch, its index included): a column per
// field, indexed by the segment's position, without pointers (the
// collector does not scan them), the seven int64 fields in 4 bytes while
// they fit (column); the epoch maps of all segments in shared columns; the
// TopicIDPartition once (a side map holds the segments that name the
// partition otherwise); custom metadata in one array of bytes, with a
// column of offsets that exists only once a segment has some; the index as positions; ids found through an open-addressing table
// of positions (idTable). Queries answer with a Ref, which reads a segment
// where it lies: a lookup allocates nothing.
//
// The package does not import the root package: a partition is named by
// TopicIDPartition, whose fields are those of remotestorage.TopicIDPartition
// (the root converts one into the other), and the states are the codes of
// statemachine.go.
package partition

import (
	"bytes"
	"cmp"
	"encoding/binary"
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

// The bits of a position's flags.
const (
	flagTxnIndexEmpty uint8 = 1 << iota
	flagOwnTP               // it names the partition otherwise than tp: ownTP holds how
	flagRemoved             // forgotten: the position is garbage until compact
)

// Partition holds one partition's segments in memory.
type Partition struct {
	DeleteState int8             // the partition-delete state; DeleteNone without a record
	tp          TopicIDPartition // the partition as its first stored segment names it
	named       bool             // tp is set

	// The segments, one position each, in the order stored; a removed
	// segment's position stays, flagged, until compact drops it.
	ids                                   []uuid.UUID
	start, end, maxTimestamp              column
	eventTimestamp, added, finished, last column
	brokerID, sizeInBytes                 []int32
	state                                 []int8
	flags                                 []uint8
	epochAt                               []int32 // the position's first entry in the epoch columns
	removed                               int     // positions removed

	// The epoch maps: a position's entries are contiguous, in epoch order,
	// from epochAt; entries replaced or removed have epochSeg -1 until
	// compact.
	epochStart []int64
	epochNum   []int32
	epochSeg   []int32 // the entry's position
	dropped    int     // entries with epochSeg -1

	// Custom metadata: each segment's as its uvarint length then its
	// bytes, in customs; customAt holds a position's offset in customs + 1
	// (0: none) and is empty while no segment has had any.
	customs       []byte
	customAt      column
	customDropped int // bytes of customs that no position points at

	byID  idTable
	ownTP map[uuid.UUID]TopicIDPartition // the segments that name the partition otherwise than tp

	epochEnds map[int32]int64 // EpochEndOffset's high-water marks (RaiseEpochEnds)

	indexMu sync.Mutex
	index   *index // nil: stale, rebuilt by the next query
}

// New returns an empty partition without a partition-delete record.
func New() *Partition {
	return &Partition{DeleteState: DeleteNone}
}

// index is an immutable view of a partition built for queries: positions
// and epoch entries, valid until the partition's next write.
type index struct {
	listed  []int32     // the positions not forgotten, ordered by StartOffset then add order
	ranges  []int32     // the epoch entries of the finished segments, by epoch, then first offset, then finish order
	epochs  []epochSpan // by epoch: where its entries are in ranges
	maxSpan int64       // the longest epoch range, bounding how far back a lookup scans
}

// epochSpan says that ranges[lo:hi] are the entries of epoch.
type epochSpan struct {
	epoch  int32
	lo, hi int32
}

var emptyIndex = &index{}

// Changed marks the index stale; writes of segments do it themselves, the
// owner calls it after it changed DeleteState. Callers hold the owner's
// write lock.
func (p *Partition) Changed() { p.index = nil }

// Len is the number of segments the partition holds.
func (p *Partition) Len() int { return len(p.ids) - p.removed }

// Segment returns segment id, false when the partition holds none.
func (p *Partition) Segment(id uuid.UUID) (Ref, bool) {
	if pos, ok := p.byID.find(p.ids, id); ok {
		return Ref{p: p, pos: pos}, true
	}
	return Ref{}, false
}

// Reserve makes room for n more segments of one epoch each: a load that
// knows how many it stores holds no spare capacity.
func (p *Partition) Reserve(n int) {
	p.ids = slices.Grow(p.ids, n)
	for _, c := range p.columns() {
		c.grow(n)
	}
	p.brokerID = slices.Grow(p.brokerID, n)
	p.sizeInBytes = slices.Grow(p.sizeInBytes, n)
	p.state = slices.Grow(p.state, n)
	p.flags = slices.Grow(p.flags, n)
	p.epochAt = slices.Grow(p.epochAt, n)
	p.epochStart = slices.Grow(p.epochStart, n)
	p.epochNum = slices.Grow(p.epochNum, n)
	p.epochSeg = slices.Grow(p.epochSeg, n)
	if need := p.byID.n + n; 4*need > 3*len(p.byID.slots) {
		p.byID.resize(p.ids, need)
	}
}

// columns returns the int64 columns (an array: no allocation).
func (p *Partition) columns() [7]*column {
	return [7]*column{&p.start, &p.end, &p.maxTimestamp, &p.eventTimestamp, &p.added, &p.finished, &p.last}
}

// Store stores a copy of s, replacing what the partition held of its id.
func (p *Partition) Store(s *Segment) {
	p.index = nil
	if !p.named {
		p.tp, p.named = s.TP, true
	}
	pos, ok := p.byID.find(p.ids, s.ID)
	if !ok {
		pos = int32(len(p.ids))
		p.ids = append(p.ids, s.ID)
		for _, c := range p.columns() {
			c.push(0)
		}
		p.brokerID = append(p.brokerID, 0)
		p.sizeInBytes = append(p.sizeInBytes, 0)
		p.state = append(p.state, 0)
		p.flags = append(p.flags, 0)
		p.epochAt = append(p.epochAt, 0)
		if p.customAt.len() > 0 {
			p.customAt.push(0)
		}
		p.storeEpochs(pos, s.Epochs)
		p.byID.insert(p.ids, pos)
	} else if !p.sameEpochs(pos, s.Epochs) {
		p.dropEpochs(pos)
		p.storeEpochs(pos, s.Epochs)
	}
	p.start.set(pos, s.Start)
	p.end.set(pos, s.End)
	p.maxTimestamp.set(pos, s.MaxTimestampMs)
	p.eventTimestamp.set(pos, s.EventTimestampMs)
	p.added.set(pos, s.AddedVersion)
	p.finished.set(pos, s.FinishedVersion)
	p.last.set(pos, s.LastVersion)
	p.brokerID[pos], p.sizeInBytes[pos], p.state[pos] = s.BrokerID, s.SizeInBytes, s.State
	var flags uint8
	if s.TxnIndexEmpty {
		flags |= flagTxnIndexEmpty
	}
	p.setCustom(pos, s.CustomMetadata)
	if s.TP != p.tp {
		if p.ownTP == nil {
			p.ownTP = make(map[uuid.UUID]TopicIDPartition)
		}
		p.ownTP[s.ID] = s.TP
		flags |= flagOwnTP
	} else if p.flags[pos]&flagOwnTP != 0 {
		delete(p.ownTP, s.ID)
	}
	p.flags[pos] = flags
	p.compactIfSparse()
}

// storeEpochs appends epochs as the entries of position pos.
func (p *Partition) storeEpochs(pos int32, epochs []EpochStart) {
	p.epochAt[pos] = int32(len(p.epochStart))
	for _, e := range epochs {
		p.epochStart = append(p.epochStart, e.Start)
		p.epochNum = append(p.epochNum, e.Epoch)
		p.epochSeg = append(p.epochSeg, pos)
	}
}

// epochsOf returns where the epoch entries of position pos are: [first, end).
func (p *Partition) epochsOf(pos int32) (first, end int32) {
	first = p.epochAt[pos]
	end = first
	for int(end) < len(p.epochSeg) && p.epochSeg[end] == pos {
		end++
	}
	return first, end
}

func (p *Partition) sameEpochs(pos int32, epochs []EpochStart) bool {
	first, end := p.epochsOf(pos)
	if int(end-first) != len(epochs) {
		return false
	}
	for k, e := range epochs {
		if p.epochNum[first+int32(k)] != e.Epoch || p.epochStart[first+int32(k)] != e.Start {
			return false
		}
	}
	return true
}

// dropEpochs marks the epoch entries of position pos garbage.
func (p *Partition) dropEpochs(pos int32) {
	first, end := p.epochsOf(pos)
	for e := first; e < end; e++ {
		p.epochSeg[e] = -1
	}
	p.dropped += int(end - first)
}

// Remove forgets segment id.
func (p *Partition) Remove(id uuid.UUID) {
	pos, ok := p.byID.find(p.ids, id)
	if !ok {
		return
	}
	p.index = nil
	p.byID.remove(p.ids, id)
	p.dropEpochs(pos)
	p.dropCustom(pos)
	delete(p.ownTP, id)
	p.flags[pos] = flagRemoved
	p.removed++
	p.compactIfSparse()
}

// customOf returns the custom metadata of position pos, in place; nil:
// none.
func (p *Partition) customOf(pos int32) []byte {
	if p.customAt.len() == 0 {
		return nil
	}
	at := p.customAt.get(pos)
	if at == 0 {
		return nil
	}
	n, k := binary.Uvarint(p.customs[at-1:])
	first := int(at-1) + k
	return p.customs[first : first+int(n) : first+int(n)]
}

// setCustom makes b (nil: none) the custom metadata of position pos, a
// copy of it; the same bytes again leave it as it is.
func (p *Partition) setCustom(pos int32, b []byte) {
	if old := p.customOf(pos); (old == nil) == (b == nil) && bytes.Equal(old, b) {
		return
	}
	p.dropCustom(pos)
	if b == nil {
		return
	}
	if p.customAt.len() == 0 {
		p.customAt.grow(cap(p.ids))
		for range p.ids {
			p.customAt.push(0)
		}
	}
	at := len(p.customs) + 1
	p.customs = binary.AppendUvarint(p.customs, uint64(len(b)))
	p.customs = append(p.customs, b...)
	p.customAt.set(pos, int64(at))
}

// dropCustom takes the custom metadata of position pos, whose bytes stay
// in customs until compact.
func (p *Partition) dropCustom(pos int32) {
	if p.customAt.len() == 0 {
		return
	}
	if at := p.customAt.get(pos); at != 0 {
		n, k := binary.Uvarint(p.customs[at-1:])
		p.customDropped += k + int(n)
		p.customAt.set(pos, 0)
	}
}

// compactIfSparse compacts once a quarter of the positions or of the epoch
// entries are garbage, or more bytes of custom metadata than there are
// positions and live bytes: each write costs O(1) amortized.
func (p *Partition) compactIfSparse() {
	if 4*p.removed > len(p.ids) || 4*p.dropped > len(p.epochSeg) ||
		p.customDropped > max(len(p.ids), len(p.customs)-p.customDropped) {
		p.compact()
	}
}

// compact drops the removed positions and the garbage epoch entries,
// keeping the order of the rest. Positions move: the index is stale.
func (p *Partition) compact() {
	p.index = nil
	epochs := len(p.epochSeg) - p.dropped
	epochStart, epochNum, epochSeg := make([]int64, 0, epochs), make([]int32, 0, epochs), make([]int32, 0, epochs)
	var customs []byte
	if p.customAt.len() > 0 {
		customs = make([]byte, 0, len(p.customs)-p.customDropped)
	}
	n := int32(0)
	for pos := range int32(len(p.ids)) {
		if p.flags[pos]&flagRemoved != 0 {
			continue
		}
		p.ids[n] = p.ids[pos]
		for _, c := range p.columns() {
			c.move(n, pos)
		}
		p.brokerID[n], p.sizeInBytes[n], p.state[n], p.flags[n] = p.brokerID[pos], p.sizeInBytes[pos], p.state[pos], p.flags[pos]
		first, end := p.epochsOf(pos)
		p.epochAt[n] = int32(len(epochStart))
		epochStart = append(epochStart, p.epochStart[first:end]...)
		epochNum = append(epochNum, p.epochNum[first:end]...)
		for range end - first {
			epochSeg = append(epochSeg, n)
		}
		if p.customAt.len() > 0 {
			at := int64(0)
			if b := p.customOf(pos); b != nil {
				at = int64(len(customs)) + 1
				customs = binary.AppendUvarint(customs, uint64(len(b)))
				customs = append(customs, b...)
			}
			p.customAt.set(n, at)
		}
		n++
	}
	p.ids = shrink(p.ids[:n])
	for _, c := range p.columns() {
		c.truncate(int(n))
	}
	p.brokerID, p.sizeInBytes = shrink(p.brokerID[:n]), shrink(p.sizeInBytes[:n])
	p.state, p.flags, p.epochAt = shrink(p.state[:n]), shrink(p.flags[:n]), shrink(p.epochAt[:n])
	p.epochStart, p.epochNum, p.epochSeg = epochStart, epochNum, epochSeg
	if p.customAt.len() > 0 {
		p.customAt.truncate(int(n))
	}
	if len(customs) == 0 {
		p.customAt, customs = column{}, nil // no custom metadata left: no column either
	}
	p.customs, p.customDropped = customs, 0
	p.removed, p.dropped = 0, 0
	p.byID.rebuild(p.ids, int(n))
}

// Empty forgets every segment and every epoch's end.
func (p *Partition) Empty() {
	*p = Partition{DeleteState: p.DeleteState, tp: p.tp, named: p.named}
}

// currentIndex returns the index, building it if stale. Callers hold at least
// the owner's read lock; concurrent readers share one build. A nil partition
// has an empty index.
func (p *Partition) currentIndex() *index {
	if p == nil || p.DeleteState == DeletePartitionFinished {
		return emptyIndex
	}
	p.indexMu.Lock()
	defer p.indexMu.Unlock()
	if p.index != nil {
		return p.index
	}
	// Sized exactly, so the index holds no spare capacity: count first.
	finished := 0
	for pos, s := range p.state {
		if s == CopySegmentFinished && p.flags[pos]&flagRemoved == 0 {
			first, end := p.epochsOf(int32(pos))
			finished += int(end - first)
		}
	}
	idx := &index{listed: make([]int32, 0, p.Len()), ranges: make([]int32, 0, finished)}
	for pos := range int32(len(p.ids)) {
		if p.flags[pos]&flagRemoved != 0 {
			continue
		}
		idx.listed = append(idx.listed, pos)
		if p.state[pos] != CopySegmentFinished {
			continue
		}
		first, end := p.epochsOf(pos)
		for e := first; e < end; e++ {
			idx.ranges = append(idx.ranges, e)
			idx.maxSpan = max(idx.maxSpan, p.epochLast(e)-p.epochStart[e])
		}
	}
	slices.SortFunc(idx.listed, func(a, b int32) int {
		return cmp.Or(cmp.Compare(p.start.get(a), p.start.get(b)), cmp.Compare(p.added.get(a), p.added.get(b)))
	})
	slices.SortFunc(idx.ranges, func(a, b int32) int {
		return cmp.Or(cmp.Compare(p.epochNum[a], p.epochNum[b]), cmp.Compare(p.epochStart[a], p.epochStart[b]),
			cmp.Compare(p.finished.get(p.epochSeg[a]), p.finished.get(p.epochSeg[b])))
	})
	for i, e := range idx.ranges {
		if n := len(idx.epochs); n == 0 || idx.epochs[n-1].epoch != p.epochNum[e] {
			idx.epochs = append(idx.epochs, epochSpan{epoch: p.epochNum[e], lo: int32(i)})
		}
		idx.epochs[len(idx.epochs)-1].hi = int32(i + 1)
	}
	idx.epochs = slices.Clip(idx.epochs)
	p.index = idx
	return idx
}

// rangesOf returns the entries of epoch in the index's ranges.
func (idx *index) rangesOf(epoch int32) []int32 {
	lo, hi := 0, len(idx.epochs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if idx.epochs[m].epoch < epoch {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == len(idx.epochs) || idx.epochs[lo].epoch != epoch {
		return nil
	}
	return idx.ranges[idx.epochs[lo].lo:idx.epochs[lo].hi]
}

// epochLast returns the last offset of epoch entry e's range: the offset
// before the segment's next epoch, or its EndOffset.
func (p *Partition) epochLast(e int32) int64 {
	if pos := p.epochSeg[e]; int(e)+1 < len(p.epochSeg) && p.epochSeg[e+1] == pos {
		return p.epochStart[e+1] - 1
	}
	return p.end.get(p.epochSeg[e])
}

// The queries below take a nil partition as an empty one. Callers hold at
// least the owner's read lock.

// Lookup returns the finished segment whose range of epoch contains offset;
// among several, the one whose range starts latest, then the one finished
// last. Only ranges starting in [offset-maxSpan, offset] can hold offset.
func (p *Partition) Lookup(epoch int32, offset int64) (Ref, bool) {
	idx := p.currentIndex()
	ranges := idx.rangesOf(epoch)
	// The first range that starts after offset.
	lo, hi := 0, len(ranges)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if p.epochStart[ranges[m]] <= offset {
			lo = m + 1
		} else {
			hi = m
		}
	}
	for j := lo - 1; j >= 0 && p.epochStart[ranges[j]] >= offset-idx.maxSpan; j-- {
		if e := ranges[j]; p.epochLast(e) >= offset {
			return Ref{p: p, pos: p.epochSeg[e]}, true
		}
	}
	return Ref{}, false
}

// Highest returns the largest EndOffset of the finished segments carrying
// epoch.
func (p *Partition) Highest(epoch int32) (int64, bool) {
	var highest int64
	found := false
	for _, e := range p.currentIndex().rangesOf(epoch) {
		if end := p.end.get(p.epochSeg[e]); !found || end > highest {
			highest, found = end, true
		}
	}
	return highest, found
}

// List yields the segments not forgotten that keep accepts, in list order
// (StartOffset, then the order of adds).
func (p *Partition) List(keep func(Ref) bool) iter.Seq[Ref] {
	return p.filter(p.currentIndex().listed, keep)
}

// ListAfter is List from the first segment after list key (startOffset,
// addedVersion): a binary search in the index, then a scan.
func (p *Partition) ListAfter(startOffset, addedVersion int64, keep func(Ref) bool) iter.Seq[Ref] {
	listed := p.currentIndex().listed
	i, found := slices.BinarySearchFunc(listed, [2]int64{startOffset, addedVersion}, func(pos int32, k [2]int64) int {
		return cmp.Or(cmp.Compare(p.start.get(pos), k[0]), cmp.Compare(p.added.get(pos), k[1]))
	})
	if found {
		i++
	}
	return p.filter(listed[i:], keep)
}

func (p *Partition) filter(positions []int32, keep func(Ref) bool) iter.Seq[Ref] {
	return func(yield func(Ref) bool) {
		for _, pos := range positions {
			if r := (Ref{p: p, pos: pos}); keep(r) && !yield(r) {
				return
			}
		}
	}
}

// Carries returns the filter of the segments that carry epoch.
func Carries(epoch int32) func(Ref) bool {
	return func(r Ref) bool { return r.Carries(epoch) }
}

// All is the filter that accepts every segment.
func All(Ref) bool { return true }

// NextWithTxnIndex walks the lookups of epoch from offset and returns the
// first segment with a transaction index; false when the walk misses first.
func (p *Partition) NextWithTxnIndex(epoch int32, offset int64) (Ref, bool) {
	for {
		r, ok := p.Lookup(epoch, offset)
		if !ok || !r.TxnIndexEmpty() {
			return r, ok
		}
		end := r.End()
		if end == maxOffset {
			return Ref{}, false
		}
		offset = end + 1
	}
}

const maxOffset = int64(^uint64(0) >> 1)

// FirstForTimestamp returns the first finished segment carrying epoch, in
// list order, whose MaxTimestampMs >= timestampMs and EndOffset >=
// startingOffset; false when there is none.
func (p *Partition) FirstForTimestamp(epoch int32, timestampMs, startingOffset int64) (Ref, bool) {
	for _, pos := range p.currentIndex().listed {
		if p.state[pos] != CopySegmentFinished || p.end.get(pos) < startingOffset || p.maxTimestamp.get(pos) < timestampMs {
			continue
		}
		if r := (Ref{p: p, pos: pos}); r.Carries(epoch) {
			return r, true
		}
	}
	return Ref{}, false
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
