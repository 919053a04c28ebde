// Package rlmmtest is the conformance suite of remotestorage.RemoteLogMetadataManager
// (plus the Kafka extensions): every implementation runs it from its own tests,
//
//	func TestConformance(t *testing.T) {
//		rlmmtest.Run(t, func(t *testing.T, opts ...remotestorage.Option) remotestorage.Manager {
//			return remotestorage.NewInMemoryManager(opts...)
//		})
//	}
//
// The suite uses only the public API and reads API.md to the letter. Every
// subtest calls t.Parallel and asks the factory for its own manager. Every
// subtest writes only under fresh random topic and segment ids, so managers
// may share one store (the randomized subtest derives its ids from its seed:
// don't rerun a seed against a store that already saw it).
//
// It also holds Model, a small independent implementation of the contract that
// the randomized subtest compares the manager with after every step.
// Environment: RLMMTEST_SEED fixes the randomized test's seed (default: the
// clock; the seed is logged and printed on failure), RLMMTEST_STEPS its length.
package rlmmtest

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
)

// Manager is remotestorage.Manager, what the suite drives: the interface
// plus the Kafka extensions. The alias keeps callers that name
// rlmmtest.Manager compiling.
type Manager = rs.Manager

// CustomMetadataLimit is the custom metadata limit the suite configures. The
// factory always receives either exactly
// remotestorage.WithMaxCustomMetadataBytes(CustomMetadataLimit) or, in the one
// subtest that checks the default limit, no option at all.
const CustomMetadataLimit = 64

// defaultCustomMetadataLimit is API.md's default for WithMaxCustomMetadataBytes.
const defaultCustomMetadataLimit = 65536

// Run runs every conformance subtest. newManager returns a new manager each
// time it is called (once per subtest) and may register cleanups on the t it
// is given. The suite checks CaughtUp is true: the manager must read from the
// primary.
func Run(t *testing.T, newManager func(t *testing.T, opts ...rs.Option) rs.Manager) {
	s := &suite{newManager: newManager}
	groups := []struct {
		name string
		run  func(t *testing.T)
	}{
		// The longest first, so that it starts early.
		{"Randomized", s.randomized},
		{"SegmentTransitions", s.segmentTransitions},
		{"PartitionDeleteTransitions", s.partitionDeleteTransitions},
		{"Add", s.add},
		{"Update", s.update},
		{"Lookup", s.lookup},
		{"Overlaps", s.overlaps},
		{"HighestOffsetForEpoch", s.highestOffsetForEpoch},
		{"Lists", s.lists},
		{"PartitionDelete", s.partitionDelete},
		{"CaughtUp", s.caughtUp},
		{"RemoteLogSize", s.remoteLogSize},
		{"NextSegmentWithTxnIndex", s.nextSegmentWithTxnIndex},
		{"FirstSegmentForTimestamp", s.firstSegmentForTimestamp},
		{"EpochEndOffset", s.epochEndOffset},
		{"DefensiveCopies", s.defensiveCopies},
		{"Identity", s.identity},
		{"Options", s.options},
		{"Concurrency", s.concurrency},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			g.run(t)
		})
	}
}

type suite struct {
	newManager func(t *testing.T, opts ...rs.Option) rs.Manager
}

// env is one subtest's world: its manager and a context.
type env struct {
	t       *testing.T
	ctx     context.Context
	m       rs.Manager
	counter atomic.Int64 // makes BrokerIDs and timestamps of updates distinct
}

// env marks t parallel and gives it a manager configured with
// CustomMetadataLimit.
func (s *suite) env(t *testing.T) *env {
	t.Helper()
	return s.envWith(t, rs.WithMaxCustomMetadataBytes(CustomMetadataLimit))
}

func (s *suite) envWith(t *testing.T, opts ...rs.Option) *env {
	t.Helper()
	t.Parallel()
	m := s.newManager(t, opts...)
	require.NotNil(t, m, "the factory returned a nil manager")
	return &env{t: t, ctx: t.Context(), m: m}
}

// run is t.Run for a leaf subtest: f gets its own parallel env.
func (s *suite) run(t *testing.T, name string, f func(e *env)) {
	t.Helper()
	t.Run(name, func(t *testing.T) { f(s.env(t)) })
}

func (e *env) next() int64 { return e.counter.Add(1) }

// newTP returns a partition no other subtest uses.
func (e *env) newTP() rs.TopicIDPartition {
	id := uuid.New()
	return rs.TopicIDPartition{TopicID: id, Topic: "topic-" + id.String()[:8], Partition: 0}
}

// withPartition is tp's topic with another partition number.
func withPartition(tp rs.TopicIDPartition, p int32) rs.TopicIDPartition {
	tp.Partition = p
	return tp
}

// segment returns a valid COPY_SEGMENT_STARTED segment of tp. epochs nil means
// {0: start}.
func (e *env) segment(tp rs.TopicIDPartition, start, end int64, epochs map[rs.LeaderEpoch]int64) rs.RemoteLogSegmentMetadata {
	if epochs == nil {
		epochs = map[rs.LeaderEpoch]int64{0: start}
	}
	n := e.next()
	return rs.RemoteLogSegmentMetadata{
		SegmentID:           rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.New()},
		StartOffset:         start,
		EndOffset:           end,
		MaxTimestampMs:      1_700_000_000_000 + end,
		BrokerID:            int32(1000 + n),
		EventTimestampMs:    1_700_000_000_000 + n,
		SegmentSizeInBytes:  int32(10*(end-start) + 7),
		CustomMetadata:      []byte(fmt.Sprintf("added-%d", n)),
		State:               rs.CopySegmentStarted,
		SegmentLeaderEpochs: epochs,
		TxnIndexEmpty:       true,
	}
}

func (e *env) add(s rs.RemoteLogSegmentMetadata) {
	e.t.Helper()
	require.NoError(e.t, e.m.AddRemoteLogSegmentMetadata(e.ctx, s), "add %s [%d, %d]", s.SegmentID.ID, s.StartOffset, s.EndOffset)
}

// addSegment adds a new segment of tp in state COPY_SEGMENT_STARTED.
func (e *env) addSegment(tp rs.TopicIDPartition, start, end int64, epochs map[rs.LeaderEpoch]int64) rs.RemoteLogSegmentMetadata {
	e.t.Helper()
	s := e.segment(tp, start, end, epochs)
	e.add(s)
	return s
}

// addFinished adds a new segment of tp and moves it to COPY_SEGMENT_FINISHED.
func (e *env) addFinished(tp rs.TopicIDPartition, start, end int64, epochs map[rs.LeaderEpoch]int64) rs.RemoteLogSegmentMetadata {
	e.t.Helper()
	s := e.addSegment(tp, start, end, epochs)
	e.to(&s, rs.CopySegmentFinished)
	return s
}

// updateFor returns an update of s to state with a fresh BrokerID and
// timestamp and no custom metadata.
func (e *env) updateFor(s rs.RemoteLogSegmentMetadata, state rs.RemoteLogSegmentState) rs.RemoteLogSegmentMetadataUpdate {
	n := e.next()
	return rs.RemoteLogSegmentMetadataUpdate{
		SegmentID:        s.SegmentID,
		EventTimestampMs: 1_800_000_000_000 + n,
		State:            state,
		BrokerID:         int32(2000 + n),
	}
}

// to updates *s to state (which must succeed) and records the update in *s.
func (e *env) to(s *rs.RemoteLogSegmentMetadata, state rs.RemoteLogSegmentState) {
	e.t.Helper()
	u := e.updateFor(*s, state)
	require.NoError(e.t, e.m.UpdateRemoteLogSegmentMetadata(e.ctx, u), "update %s from %s to %s", s.SegmentID.ID, s.State, state)
	*s = applyUpdate(*s, u)
}

// reach moves *s from COPY_SEGMENT_STARTED to state along allowed transitions.
func (e *env) reach(s *rs.RemoteLogSegmentMetadata, state rs.RemoteLogSegmentState) {
	e.t.Helper()
	require.Equal(e.t, rs.CopySegmentStarted, s.State)
	path := map[rs.RemoteLogSegmentState][]rs.RemoteLogSegmentState{
		rs.CopySegmentStarted:    nil,
		rs.CopySegmentFinished:   {rs.CopySegmentFinished},
		rs.DeleteSegmentStarted:  {rs.CopySegmentFinished, rs.DeleteSegmentStarted},
		rs.DeleteSegmentFinished: {rs.CopySegmentFinished, rs.DeleteSegmentStarted, rs.DeleteSegmentFinished},
	}[state]
	for _, st := range path {
		e.to(s, st)
	}
}

func (e *env) putDelete(tp rs.TopicIDPartition, state rs.RemotePartitionDeleteState) error {
	n := e.next()
	return e.m.PutRemotePartitionDeleteMetadata(e.ctx, rs.RemotePartitionDeleteMetadata{
		TopicIDPartition: tp, State: state, EventTimestampMs: 1_900_000_000_000 + n, BrokerID: int32(3000 + n),
	})
}

func (e *env) mustPutDelete(tp rs.TopicIDPartition, states ...rs.RemotePartitionDeleteState) {
	e.t.Helper()
	for _, st := range states {
		require.NoError(e.t, e.putDelete(tp, st), "partition delete of %s to %s", tp, st)
	}
}

var allSentinels = []error{
	rs.ErrInvalidAdd, rs.ErrSegmentNotFound, rs.ErrInvalidSegmentTransition,
	rs.ErrInvalidPartitionDeleteTransition, rs.ErrNotReady, rs.ErrIO,
}

// requireSentinel checks that err matches want and no other sentinel (in
// particular not ErrIO), and that it adds detail to the sentinel's text.
func requireSentinel(t *testing.T, err, want error, msgAndArgs ...any) {
	t.Helper()
	require.Error(t, err, msgAndArgs...)
	require.ErrorIs(t, err, want, msgAndArgs...)
	for _, s := range allSentinels {
		if s != want {
			require.NotErrorIs(t, err, s, msgAndArgs...)
		}
	}
	require.NotEqual(t, want.Error(), err.Error(), "errors wrap the sentinel with detail")
}

// requireResult checks err against want: nil, or a sentinel.
func requireResult(t *testing.T, err, want error, msgAndArgs ...any) {
	t.Helper()
	if want == nil {
		require.NoError(t, err, msgAndArgs...)
		return
	}
	requireSentinel(t, err, want, msgAndArgs...)
}

// normalized makes metadata comparable with require.Equal: no custom metadata
// is nil whether it was stored as nil or empty.
func normalized(s rs.RemoteLogSegmentMetadata) rs.RemoteLogSegmentMetadata {
	s = cloneSegment(s)
	if len(s.CustomMetadata) == 0 {
		s.CustomMetadata = nil
	}
	return s
}

func normalizedAll(ss []rs.RemoteLogSegmentMetadata) []rs.RemoteLogSegmentMetadata {
	out := make([]rs.RemoteLogSegmentMetadata, 0, len(ss))
	for _, s := range ss {
		out = append(out, normalized(s))
	}
	return out
}

func requireSameSegment(t *testing.T, want, got rs.RemoteLogSegmentMetadata, msgAndArgs ...any) {
	t.Helper()
	require.Equal(t, normalized(want), normalized(got), msgAndArgs...)
}

func requireSameSegments(t *testing.T, want, got []rs.RemoteLogSegmentMetadata, msgAndArgs ...any) {
	t.Helper()
	require.Equal(t, normalizedAll(want), normalizedAll(got), msgAndArgs...)
}

// list returns ListRemoteLogSegments(tp), which must not fail.
func (e *env) list(tp rs.TopicIDPartition) []rs.RemoteLogSegmentMetadata {
	e.t.Helper()
	got, err := e.m.ListRemoteLogSegments(e.ctx, tp)
	require.NoError(e.t, err, "list %s", tp)
	return got
}

func (e *env) listByEpoch(tp rs.TopicIDPartition, epoch rs.LeaderEpoch) []rs.RemoteLogSegmentMetadata {
	e.t.Helper()
	got, err := e.m.ListRemoteLogSegmentsByEpoch(e.ctx, tp, epoch)
	require.NoError(e.t, err, "list %s epoch %d", tp, epoch)
	return got
}

// requireList checks ListRemoteLogSegments(tp) against want, in order and
// field by field.
func (e *env) requireList(tp rs.TopicIDPartition, want ...rs.RemoteLogSegmentMetadata) {
	e.t.Helper()
	requireSameSegments(e.t, want, e.list(tp), "ListRemoteLogSegments(%s)", tp)
}

func (e *env) requireListByEpoch(tp rs.TopicIDPartition, epoch rs.LeaderEpoch, want ...rs.RemoteLogSegmentMetadata) {
	e.t.Helper()
	requireSameSegments(e.t, want, e.listByEpoch(tp, epoch), "ListRemoteLogSegmentsByEpoch(%s, %d)", tp, epoch)
}

// requireLookup checks RemoteLogSegmentMetadata(tp, epoch, offset): want nil
// means a miss, (zero, false, nil).
func (e *env) requireLookup(tp rs.TopicIDPartition, epoch rs.LeaderEpoch, offset int64, want *rs.RemoteLogSegmentMetadata) {
	e.t.Helper()
	got, ok, err := e.m.RemoteLogSegmentMetadata(e.ctx, tp, epoch, offset)
	require.NoError(e.t, err, "lookup %s epoch %d offset %d", tp, epoch, offset)
	if want == nil {
		require.False(e.t, ok, "lookup epoch %d offset %d: want a miss, got segment %s [%d, %d]", epoch, offset, got.SegmentID.ID, got.StartOffset, got.EndOffset)
		require.Equal(e.t, rs.RemoteLogSegmentMetadata{}, got, "a miss returns the zero value")
		return
	}
	require.True(e.t, ok, "lookup epoch %d offset %d: want segment %s [%d, %d], got a miss", epoch, offset, want.SegmentID.ID, want.StartOffset, want.EndOffset)
	require.Equal(e.t, want.SegmentID.ID, got.SegmentID.ID, "lookup epoch %d offset %d: want segment [%d, %d], got [%d, %d]", epoch, offset, want.StartOffset, want.EndOffset, got.StartOffset, got.EndOffset)
	requireSameSegment(e.t, *want, got, "lookup epoch %d offset %d", epoch, offset)
}

func (e *env) requireHighest(tp rs.TopicIDPartition, epoch rs.LeaderEpoch, want int64, wantOK bool) {
	e.t.Helper()
	got, ok, err := e.m.HighestOffsetForEpoch(e.ctx, tp, epoch)
	require.NoError(e.t, err, "HighestOffsetForEpoch(%s, %d)", tp, epoch)
	require.Equal(e.t, wantOK, ok, "HighestOffsetForEpoch(%s, %d) found", tp, epoch)
	if !wantOK {
		want = 0
	}
	require.Equal(e.t, want, got, "HighestOffsetForEpoch(%s, %d)", tp, epoch)
}

func (e *env) requireSize(tp rs.TopicIDPartition, epoch rs.LeaderEpoch, want int64) {
	e.t.Helper()
	got, err := e.m.RemoteLogSize(e.ctx, tp, epoch)
	require.NoError(e.t, err, "RemoteLogSize(%s, %d)", tp, epoch)
	require.Equal(e.t, want, got, "RemoteLogSize(%s, %d)", tp, epoch)
}

func (e *env) requireNextTxn(tp rs.TopicIDPartition, epoch rs.LeaderEpoch, offset int64, want *rs.RemoteLogSegmentMetadata) {
	e.t.Helper()
	got, ok, err := e.m.NextSegmentWithTxnIndex(e.ctx, tp, epoch, offset)
	require.NoError(e.t, err, "NextSegmentWithTxnIndex(%s, %d, %d)", tp, epoch, offset)
	if want == nil {
		require.False(e.t, ok, "NextSegmentWithTxnIndex epoch %d offset %d: want none, got [%d, %d]", epoch, offset, got.StartOffset, got.EndOffset)
		require.Equal(e.t, rs.RemoteLogSegmentMetadata{}, got, "none returns the zero value")
		return
	}
	require.True(e.t, ok, "NextSegmentWithTxnIndex epoch %d offset %d: want [%d, %d], got none", epoch, offset, want.StartOffset, want.EndOffset)
	require.Equal(e.t, want.SegmentID.ID, got.SegmentID.ID, "NextSegmentWithTxnIndex epoch %d offset %d: want [%d, %d], got [%d, %d]", epoch, offset, want.StartOffset, want.EndOffset, got.StartOffset, got.EndOffset)
	requireSameSegment(e.t, *want, got)
}

// requireSegmentsAsStored checks that the segments of tp are exactly want
// (segments in DELETE_SEGMENT_FINISHED are expected absent), in list order,
// and that each is visible to a lookup exactly when it is
// COPY_SEGMENT_FINISHED. want must not overlap and must carry epoch 0 at
// its start offset.
func (e *env) requireSegmentsAsStored(tp rs.TopicIDPartition, want ...rs.RemoteLogSegmentMetadata) {
	e.t.Helper()
	var listed []rs.RemoteLogSegmentMetadata
	for _, s := range want {
		if s.State != rs.DeleteSegmentFinished {
			listed = append(listed, s)
		}
	}
	slices.SortStableFunc(listed, func(a, b rs.RemoteLogSegmentMetadata) int { return int(a.StartOffset - b.StartOffset) })
	e.requireList(tp, listed...)
	for _, s := range want {
		if s.State == rs.CopySegmentFinished {
			e.requireLookup(tp, 0, s.StartOffset, &s)
		} else {
			e.requireLookup(tp, 0, s.StartOffset, nil)
		}
	}
}

// stateName names a segment state in subtest names; invalid values read
// INVALID_<n>.
func stateName(s rs.RemoteLogSegmentState) string {
	switch s {
	case rs.CopySegmentStarted, rs.CopySegmentFinished, rs.DeleteSegmentStarted, rs.DeleteSegmentFinished:
		return s.String()
	}
	return fmt.Sprintf("INVALID_%d", s)
}

func deleteStateName(s rs.RemotePartitionDeleteState, has bool) string {
	if !has {
		return "NONE"
	}
	switch s {
	case rs.DeletePartitionMarked, rs.DeletePartitionStarted, rs.DeletePartitionFinished:
		return s.String()
	}
	return fmt.Sprintf("INVALID_%d", s)
}
