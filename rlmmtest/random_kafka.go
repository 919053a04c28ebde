package rlmmtest

import (
	rs "github.com/krabka/remotestorage"

	"github.com/stretchr/testify/require"
)

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
