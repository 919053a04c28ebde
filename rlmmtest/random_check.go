package rlmmtest

// random_check.go: the randomized run's checks (random.go): every query of
// the manager under test against the model's answer.

import (
	"slices"

	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
)

// checkPartition compares a sample of the queries about tp.
func (r *randomRun) checkPartition(tp rs.TopicIDPartition) {
	r.e.t.Helper()
	r.compareList(tp)
	r.queryRandomly(tp, 1)
}

// checkAll compares every partition; full also compares every lookup.
func (r *randomRun) checkAll(full bool) {
	r.e.t.Helper()
	for _, tp := range append(slices.Clone(r.parts), r.unknown) {
		r.compareList(tp)
		for e := rs.LeaderEpoch(0); e < randomEpochs; e++ {
			r.compareByEpoch(tp, e)
			r.compareHighest(tp, e)
			r.compareSize(tp, e)
			r.compareEpochEnd(tp, e)
			if full {
				for o := int64(0); o < randomOffsets; o++ {
					r.compareLookup(tp, e, o)
				}
				r.compareNextTxn(tp, e, 0)
				for ts := int64(-1); ts <= randomTimestamps; ts++ {
					r.compareFirstForTimestamp(tp, e, ts*1000, r.randomOffset())
				}
			}
		}
		if !full {
			r.queryRandomly(tp, 3)
		}
	}
}

func (r *randomRun) randomEpoch() rs.LeaderEpoch {
	return rs.LeaderEpoch(r.rnd.IntN(randomEpochs+2) - 1) // includes -1 and one never used
}

func (r *randomRun) randomOffset() int64 { return r.rnd.Int64N(randomOffsets+3) - 1 }

// queryRandomly compares n random lookups and one of each other query.
func (r *randomRun) queryRandomly(tp rs.TopicIDPartition, n int) {
	r.e.t.Helper()
	for range n {
		r.compareLookup(tp, r.randomEpoch(), r.randomOffset())
	}
	e := r.randomEpoch()
	r.compareByEpoch(tp, e)
	r.compareHighest(tp, e)
	r.compareSize(tp, e)
	r.compareNextTxn(tp, r.randomEpoch(), r.randomOffset())
	r.compareEpochEnd(tp, e)
	r.compareFirstForTimestamp(tp, r.randomEpoch(), r.randomTimestamp(), r.randomOffset())
}

func (r *randomRun) compareList(tp rs.TopicIDPartition) {
	t := r.e.t
	t.Helper()
	want, _ := r.model.ListRemoteLogSegments(r.e.ctx, tp)
	got, err := r.e.m.ListRemoteLogSegments(r.e.ctx, tp)
	require.NoError(t, err, r.msg("list %s", describeTP(tp)))
	requireSameSegments(t, want, got, r.msg("list %s", describeTP(tp)))
}

func (r *randomRun) compareByEpoch(tp rs.TopicIDPartition, e rs.LeaderEpoch) {
	t := r.e.t
	t.Helper()
	want, _ := r.model.ListRemoteLogSegmentsByEpoch(r.e.ctx, tp, e)
	got, err := r.e.m.ListRemoteLogSegmentsByEpoch(r.e.ctx, tp, e)
	require.NoError(t, err, r.msg("list %s epoch %d", describeTP(tp), e))
	requireSameSegments(t, want, got, r.msg("list %s epoch %d", describeTP(tp), e))
}

func (r *randomRun) compareHighest(tp rs.TopicIDPartition, e rs.LeaderEpoch) {
	t := r.e.t
	t.Helper()
	want, wantOK, _ := r.model.HighestOffsetForEpoch(r.e.ctx, tp, e)
	got, ok, err := r.e.m.HighestOffsetForEpoch(r.e.ctx, tp, e)
	require.NoError(t, err, r.msg("highest %s epoch %d", describeTP(tp), e))
	require.Equal(t, [2]any{want, wantOK}, [2]any{got, ok}, r.msg("highest %s epoch %d", describeTP(tp), e))
}

func (r *randomRun) compareSize(tp rs.TopicIDPartition, e rs.LeaderEpoch) {
	t := r.e.t
	t.Helper()
	want, _ := r.model.RemoteLogSize(r.e.ctx, tp, e)
	got, err := r.e.m.RemoteLogSize(r.e.ctx, tp, e)
	require.NoError(t, err, r.msg("size %s epoch %d", describeTP(tp), e))
	require.Equal(t, want, got, r.msg("size %s epoch %d", describeTP(tp), e))
}

func (r *randomRun) compareLookup(tp rs.TopicIDPartition, e rs.LeaderEpoch, o int64) {
	t := r.e.t
	t.Helper()
	want, wantOK, _ := r.model.RemoteLogSegmentMetadata(r.e.ctx, tp, e, o)
	got, ok, err := r.e.m.RemoteLogSegmentMetadata(r.e.ctx, tp, e, o)
	what := r.msg("lookup %s epoch %d offset %d: want %s, got %s", describeTP(tp), e, o, describeFound(want, wantOK), describeFound(got, ok))
	require.NoError(t, err, what)
	require.Equal(t, wantOK, ok, what)
	requireSameSegment(t, want, got, what)
}

func (r *randomRun) compareNextTxn(tp rs.TopicIDPartition, e rs.LeaderEpoch, o int64) {
	t := r.e.t
	t.Helper()
	want, wantOK, _ := r.model.NextSegmentWithTxnIndex(r.e.ctx, tp, e, o)
	got, ok, err := r.e.m.NextSegmentWithTxnIndex(r.e.ctx, tp, e, o)
	what := r.msg("next txn %s epoch %d offset %d: want %s, got %s", describeTP(tp), e, o, describeFound(want, wantOK), describeFound(got, ok))
	require.NoError(t, err, what)
	require.Equal(t, wantOK, ok, what)
	requireSameSegment(t, want, got, what)
}

func describeFound(s rs.RemoteLogSegmentMetadata, ok bool) string {
	if !ok {
		return "none"
	}
	return describeSegment(s)
}

// randomTimestamps is how many distinct MaxTimestampMs values (multiples of
// 1000) the randomized test gives segments, so FirstSegmentForTimestamp
// meets ties and timestamps that go down as offsets go up.
const randomTimestamps = 16

// randomTimestamp is a multiple of 1000 from below the smallest
// MaxTimestampMs to above the largest, or an odd value between them.
func (r *randomRun) randomTimestamp() int64 {
	ts := (r.rnd.Int64N(randomTimestamps+2) - 1) * 1000
	if r.rnd.IntN(4) == 0 {
		ts += 500
	}
	return ts
}

func (r *randomRun) compareFirstForTimestamp(tp rs.TopicIDPartition, e rs.LeaderEpoch, ts, startingOffset int64) {
	t := r.e.t
	t.Helper()
	want, wantOK, _ := r.model.FirstSegmentForTimestamp(r.e.ctx, tp, e, ts, startingOffset)
	got, ok, err := r.e.m.FirstSegmentForTimestamp(r.e.ctx, tp, e, ts, startingOffset)
	what := r.msg("first for timestamp %s epoch %d timestamp %d from offset %d: want %s, got %s",
		describeTP(tp), e, ts, startingOffset, describeFound(want, wantOK), describeFound(got, ok))
	require.NoError(t, err, what)
	require.Equal(t, wantOK, ok, what)
	requireSameSegment(t, want, got, what)
}

func (r *randomRun) compareEpochEnd(tp rs.TopicIDPartition, e rs.LeaderEpoch) {
	t := r.e.t
	t.Helper()
	want, wantOK, _ := r.model.EpochEndOffset(r.e.ctx, tp, e)
	got, ok, err := r.e.m.EpochEndOffset(r.e.ctx, tp, e)
	require.NoError(t, err, r.msg("epoch end %s epoch %d", describeTP(tp), e))
	require.Equal(t, [2]any{want, wantOK}, [2]any{got, ok}, r.msg("epoch end %s epoch %d", describeTP(tp), e))
}
