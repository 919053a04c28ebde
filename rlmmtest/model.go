package rlmmtest

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/google/uuid"

	rs "github.com/krabka/remotestorage"
)

// Model is an independent, deliberately plain implementation of the contract
// in API.md, written from the text alone: the randomized test compares every
// answer of the manager under test with it. It never shares code with the
// managers it checks (no remotestorage internals, not even the state machine
// tables), so a misreading of the contract has to be made twice to go unseen.
//
// Model satisfies remotestorage.Manager and is safe for concurrent use (one mutex). Where
// API.md leaves the order of two checks open, Model picks one; see Update.
type Model struct {
	mu    sync.Mutex
	limit int
	seq   int64                   // orders adds and first finishes
	ids   map[uuid.UUID]modelKey  // every segment id ever added: taken forever
	parts map[modelKey]*modelPart // partitions ever written to
}

// modelKey is a partition's identity: (TopicID, Partition); the topic name is
// not part of it.
type modelKey struct {
	topicID   uuid.UUID
	partition int32
}

type modelPart struct {
	deleteState rs.RemotePartitionDeleteState
	hasDelete   bool
	segs        map[uuid.UUID]*modelSeg
}

type modelSeg struct {
	md        rs.RemoteLogSegmentMetadata
	addSeq    int64
	finishSeq int64 // when COPY_SEGMENT_FINISHED was first applied; 0: never
}

var _ rs.Manager = (*Model)(nil)

// NewModel returns an empty model that accepts custom metadata of up to
// maxCustomMetadataBytes bytes.
func NewModel(maxCustomMetadataBytes int) *Model {
	return &Model{
		limit: maxCustomMetadataBytes,
		ids:   map[uuid.UUID]modelKey{},
		parts: map[modelKey]*modelPart{},
	}
}

func keyOf(tp rs.TopicIDPartition) modelKey { return modelKey{tp.TopicID, tp.Partition} }

// modelSegmentTransitions is the table of API.md "Segment lifecycle".
var modelSegmentTransitions = map[rs.RemoteLogSegmentState][]rs.RemoteLogSegmentState{
	rs.CopySegmentStarted:    {rs.CopySegmentFinished, rs.DeleteSegmentStarted},
	rs.CopySegmentFinished:   {rs.CopySegmentFinished, rs.DeleteSegmentStarted},
	rs.DeleteSegmentStarted:  {rs.DeleteSegmentStarted, rs.DeleteSegmentFinished},
	rs.DeleteSegmentFinished: {rs.DeleteSegmentFinished},
}

// expectedSegmentTransition is what an update of an existing segment from
// from to to returns: nil or ErrInvalidSegmentTransition.
func expectedSegmentTransition(from, to rs.RemoteLogSegmentState) error {
	if slices.Contains(modelSegmentTransitions[from], to) {
		return nil
	}
	return rs.ErrInvalidSegmentTransition
}

// updateTargetAllowed: an update to COPY_SEGMENT_STARTED or to a value that is
// not a state is refused before anything else.
func updateTargetAllowed(to rs.RemoteLogSegmentState) bool {
	return to == rs.CopySegmentFinished || to == rs.DeleteSegmentStarted || to == rs.DeleteSegmentFinished
}

// pdNone stands for "no partition-delete record" in the model's table.
const pdNone rs.RemotePartitionDeleteState = -100

var modelPartitionDeleteTransitions = map[rs.RemotePartitionDeleteState][]rs.RemotePartitionDeleteState{
	pdNone:                     {rs.DeletePartitionMarked},
	rs.DeletePartitionMarked:   {rs.DeletePartitionMarked, rs.DeletePartitionStarted},
	rs.DeletePartitionStarted:  {rs.DeletePartitionStarted, rs.DeletePartitionFinished},
	rs.DeletePartitionFinished: {rs.DeletePartitionFinished},
}

// expectedPartitionDeleteTransition: nil or ErrInvalidPartitionDeleteTransition.
// hasFrom is false for a partition without a delete record.
func expectedPartitionDeleteTransition(from rs.RemotePartitionDeleteState, hasFrom bool, to rs.RemotePartitionDeleteState) error {
	if !hasFrom {
		from = pdNone
	}
	if slices.Contains(modelPartitionDeleteTransitions[from], to) {
		return nil
	}
	return rs.ErrInvalidPartitionDeleteTransition
}

func legalTopic(name string) bool {
	if len(name) < 1 || len(name) > 249 || name == "." || name == ".." {
		return false
	}
	for _, c := range []byte(name) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

func modelErr(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: model: %s", sentinel, fmt.Sprintf(format, args...))
}

// checkAdd applies every rule of API.md "Add" that needs no stored state.
func (m *Model) checkAdd(s rs.RemoteLogSegmentMetadata) error {
	tp := s.SegmentID.TopicIDPartition
	switch {
	case s.State != rs.CopySegmentStarted:
		return modelErr(rs.ErrInvalidAdd, "state %d", s.State)
	case tp.TopicID == uuid.Nil:
		return modelErr(rs.ErrInvalidAdd, "zero topic id")
	case s.SegmentID.ID == uuid.Nil:
		return modelErr(rs.ErrInvalidAdd, "zero segment id")
	case !legalTopic(tp.Topic):
		return modelErr(rs.ErrInvalidAdd, "topic %q", tp.Topic)
	case tp.Partition < 0:
		return modelErr(rs.ErrInvalidAdd, "partition %d", tp.Partition)
	case s.StartOffset < 0:
		return modelErr(rs.ErrInvalidAdd, "start offset %d", s.StartOffset)
	case s.EndOffset < s.StartOffset:
		return modelErr(rs.ErrInvalidAdd, "end offset %d < start %d", s.EndOffset, s.StartOffset)
	case len(s.SegmentLeaderEpochs) == 0:
		return modelErr(rs.ErrInvalidAdd, "no epochs")
	case s.SegmentSizeInBytes < 0:
		return modelErr(rs.ErrInvalidAdd, "size %d", s.SegmentSizeInBytes)
	case len(s.CustomMetadata) > m.limit:
		return modelErr(rs.ErrInvalidAdd, "custom metadata %d bytes", len(s.CustomMetadata))
	}
	for e, start := range s.SegmentLeaderEpochs {
		if e < 0 {
			return modelErr(rs.ErrInvalidAdd, "epoch %d", e)
		}
		if start < s.StartOffset || start > s.EndOffset {
			return modelErr(rs.ErrInvalidAdd, "epoch %d start %d", e, start)
		}
		for e2, start2 := range s.SegmentLeaderEpochs {
			if e2 > e && start2 <= start {
				return modelErr(rs.ErrInvalidAdd, "epoch %d start %d not after epoch %d start %d", e2, start2, e, start)
			}
		}
	}
	return nil
}

// AddRemoteLogSegmentMetadata implements API.md "Add".
func (m *Model) AddRemoteLogSegmentMetadata(_ context.Context, s rs.RemoteLogSegmentMetadata) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkAdd(s); err != nil {
		return err
	}
	if _, taken := m.ids[s.SegmentID.ID]; taken {
		return modelErr(rs.ErrInvalidAdd, "id %s taken", s.SegmentID.ID)
	}
	k := keyOf(s.SegmentID.TopicIDPartition)
	p := m.part(k)
	if p.hasDelete {
		return modelErr(rs.ErrInvalidAdd, "partition has a delete record")
	}
	m.seq++
	m.ids[s.SegmentID.ID] = k
	p.segs[s.SegmentID.ID] = &modelSeg{md: cloneSegment(s), addSeq: m.seq}
	return nil
}

func (m *Model) part(k modelKey) *modelPart {
	p := m.parts[k]
	if p == nil {
		p = &modelPart{segs: map[uuid.UUID]*modelSeg{}}
		m.parts[k] = p
	}
	return p
}

// findForUpdate returns the segment an update names, or nil when the update
// must fail with ErrSegmentNotFound.
func (m *Model) findForUpdate(id rs.RemoteLogSegmentID) *modelSeg {
	k, ok := m.ids[id.ID]
	if !ok || k != keyOf(id.TopicIDPartition) {
		return nil
	}
	p := m.parts[k]
	if p.hasDelete && p.deleteState == rs.DeletePartitionFinished {
		return nil
	}
	return p.segs[id.ID]
}

// UpdateRemoteLogSegmentMetadata implements API.md "Update". Order of checks:
// target state; segment found; custom metadata limit; transition table.
// API.md does not order "not found" against "custom metadata too long"; the
// randomized test never asks for both at once.
func (m *Model) UpdateRemoteLogSegmentMetadata(_ context.Context, u rs.RemoteLogSegmentMetadataUpdate) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !updateTargetAllowed(u.State) {
		return modelErr(rs.ErrInvalidSegmentTransition, "segment %s: no update to %d", u.SegmentID.ID, u.State)
	}
	s := m.findForUpdate(u.SegmentID)
	if s == nil {
		return modelErr(rs.ErrSegmentNotFound, "segment %s", u.SegmentID.ID)
	}
	if len(u.CustomMetadata) > m.limit {
		return modelErr(rs.ErrInvalidSegmentTransition, "segment %s: custom metadata %d bytes", u.SegmentID.ID, len(u.CustomMetadata))
	}
	if err := expectedSegmentTransition(s.md.State, u.State); err != nil {
		return modelErr(err, "segment %s: %s -> %s", u.SegmentID.ID, s.md.State, u.State)
	}
	s.md = applyUpdate(s.md, u)
	if u.State == rs.CopySegmentFinished && s.finishSeq == 0 {
		m.seq++
		s.finishSeq = m.seq
	}
	return nil
}

// applyUpdate returns md after a successful update u.
func applyUpdate(md rs.RemoteLogSegmentMetadata, u rs.RemoteLogSegmentMetadataUpdate) rs.RemoteLogSegmentMetadata {
	md = cloneSegment(md)
	md.State = u.State
	md.BrokerID = u.BrokerID
	md.EventTimestampMs = u.EventTimestampMs
	if u.CustomMetadata != nil {
		md.CustomMetadata = append([]byte{}, u.CustomMetadata...)
	}
	return md
}

// PutRemotePartitionDeleteMetadata implements API.md "Partition delete".
func (m *Model) PutRemotePartitionDeleteMetadata(_ context.Context, d rs.RemotePartitionDeleteMetadata) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := keyOf(d.TopicIDPartition)
	from, hasFrom := rs.RemotePartitionDeleteState(0), false
	if p := m.parts[k]; p != nil {
		from, hasFrom = p.deleteState, p.hasDelete
	}
	if err := expectedPartitionDeleteTransition(from, hasFrom, d.State); err != nil {
		return modelErr(err, "partition delete %d -> %d", from, d.State)
	}
	p := m.part(k)
	p.deleteState, p.hasDelete = d.State, true
	return nil
}

// visible returns the segments of tp that queries return (not forgotten), in
// list order: StartOffset, then the order they were added.
func (m *Model) visible(tp rs.TopicIDPartition) []*modelSeg {
	p := m.parts[keyOf(tp)]
	if p == nil || p.hasDelete && p.deleteState == rs.DeletePartitionFinished {
		return nil
	}
	var out []*modelSeg
	for _, s := range p.segs {
		if s.md.State != rs.DeleteSegmentFinished {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b *modelSeg) int {
		if a.md.StartOffset != b.md.StartOffset {
			if a.md.StartOffset < b.md.StartOffset {
				return -1
			}
			return 1
		}
		return int(a.addSeq - b.addSeq)
	})
	return out
}

// epochRange is the range of epoch e in segment s (API.md "Queries").
func epochRange(s rs.RemoteLogSegmentMetadata, e rs.LeaderEpoch) (first, last int64, ok bool) {
	first, ok = s.SegmentLeaderEpochs[e]
	if !ok {
		return 0, 0, false
	}
	last = s.EndOffset
	next := rs.LeaderEpoch(-1)
	for e2 := range s.SegmentLeaderEpochs {
		if e2 > e && (next == -1 || e2 < next) {
			next = e2
		}
	}
	if next != -1 {
		last = s.SegmentLeaderEpochs[next] - 1
	}
	return first, last, true
}

func (m *Model) lookup(tp rs.TopicIDPartition, e rs.LeaderEpoch, o int64) *modelSeg {
	var best *modelSeg
	var bestFirst int64
	for _, s := range m.visible(tp) {
		if s.md.State != rs.CopySegmentFinished {
			continue
		}
		first, last, ok := epochRange(s.md, e)
		if !ok || o < first || o > last {
			continue
		}
		if best == nil || first > bestFirst || first == bestFirst && s.finishSeq > best.finishSeq {
			best, bestFirst = s, first
		}
	}
	return best
}

// RemoteLogSegmentMetadata implements the lookup of API.md "Queries".
func (m *Model) RemoteLogSegmentMetadata(_ context.Context, tp rs.TopicIDPartition, e rs.LeaderEpoch, o int64) (rs.RemoteLogSegmentMetadata, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.lookup(tp, e, o); s != nil {
		return cloneSegment(s.md), true, nil
	}
	return rs.RemoteLogSegmentMetadata{}, false, nil
}

// HighestOffsetForEpoch is the max EndOffset over finished segments carrying e.
func (m *Model) HighestOffsetForEpoch(_ context.Context, tp rs.TopicIDPartition, e rs.LeaderEpoch) (int64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var max int64
	found := false
	for _, s := range m.visible(tp) {
		if _, ok := s.md.SegmentLeaderEpochs[e]; !ok || s.md.State != rs.CopySegmentFinished {
			continue
		}
		if !found || s.md.EndOffset > max {
			max, found = s.md.EndOffset, true
		}
	}
	return max, found, nil
}

// ListRemoteLogSegments lists the segments of tp not forgotten.
func (m *Model) ListRemoteLogSegments(_ context.Context, tp rs.TopicIDPartition) ([]rs.RemoteLogSegmentMetadata, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.list(tp, nil), nil
}

// ListRemoteLogSegmentsByEpoch lists the segments of tp not forgotten that
// carry e.
func (m *Model) ListRemoteLogSegmentsByEpoch(_ context.Context, tp rs.TopicIDPartition, e rs.LeaderEpoch) ([]rs.RemoteLogSegmentMetadata, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.list(tp, &e), nil
}

func (m *Model) list(tp rs.TopicIDPartition, e *rs.LeaderEpoch) []rs.RemoteLogSegmentMetadata {
	var out []rs.RemoteLogSegmentMetadata
	for _, s := range m.visible(tp) {
		if e != nil {
			if _, ok := s.md.SegmentLeaderEpochs[*e]; !ok {
				continue
			}
		}
		out = append(out, cloneSegment(s.md))
	}
	return out
}

// CaughtUp is always true: the model has no replica to wait for.
func (m *Model) CaughtUp(context.Context, rs.TopicIDPartition) (bool, error) { return true, nil }

// RemoteLogSize sums SegmentSizeInBytes over ListRemoteLogSegmentsByEpoch.
func (m *Model) RemoteLogSize(_ context.Context, tp rs.TopicIDPartition, e rs.LeaderEpoch) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var sum int64
	for _, s := range m.list(tp, &e) {
		sum += int64(s.SegmentSizeInBytes)
	}
	return sum, nil
}

// NextSegmentWithTxnIndex walks lookups from offset and returns the first
// segment with a transaction index.
func (m *Model) NextSegmentWithTxnIndex(_ context.Context, tp rs.TopicIDPartition, e rs.LeaderEpoch, o int64) (rs.RemoteLogSegmentMetadata, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for {
		s := m.lookup(tp, e, o)
		if s == nil {
			return rs.RemoteLogSegmentMetadata{}, false, nil
		}
		if !s.md.TxnIndexEmpty {
			return cloneSegment(s.md), true, nil
		}
		o = s.md.EndOffset + 1
	}
}

func cloneSegment(s rs.RemoteLogSegmentMetadata) rs.RemoteLogSegmentMetadata {
	if s.CustomMetadata != nil {
		s.CustomMetadata = append([]byte{}, s.CustomMetadata...)
	}
	if s.SegmentLeaderEpochs != nil {
		epochs := make(map[rs.LeaderEpoch]int64, len(s.SegmentLeaderEpochs))
		for e, o := range s.SegmentLeaderEpochs {
			epochs[e] = o
		}
		s.SegmentLeaderEpochs = epochs
	}
	return s
}

// FirstSegmentForTimestamp is, in list order, the first finished segment
// carrying e whose MaxTimestampMs >= ts and EndOffset >= startingOffset.
func (m *Model) FirstSegmentForTimestamp(_ context.Context, tp rs.TopicIDPartition, e rs.LeaderEpoch, ts, startingOffset int64) (rs.RemoteLogSegmentMetadata, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.visible(tp) {
		if _, ok := s.md.SegmentLeaderEpochs[e]; !ok || s.md.State != rs.CopySegmentFinished {
			continue
		}
		if s.md.MaxTimestampMs >= ts && s.md.EndOffset >= startingOffset {
			return cloneSegment(s.md), true, nil
		}
	}
	return rs.RemoteLogSegmentMetadata{}, false, nil
}

// EpochEndOffset is the largest offset of e's range over every segment of tp
// that ever reached COPY_SEGMENT_FINISHED, forgotten since or not; none once
// the partition's delete finished.
func (m *Model) EpochEndOffset(_ context.Context, tp rs.TopicIDPartition, e rs.LeaderEpoch) (int64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.parts[keyOf(tp)]
	if p == nil || p.hasDelete && p.deleteState == rs.DeletePartitionFinished {
		return 0, false, nil
	}
	var end int64
	found := false
	for _, s := range p.segs {
		if s.finishSeq == 0 {
			continue // never reached COPY_SEGMENT_FINISHED
		}
		if _, last, ok := epochRange(s.md, e); ok && (!found || last > end) {
			end, found = last, true
		}
	}
	return end, found, nil
}
