package migrations_test

// The database side of EpochEndOffset: the epoch ends that an operator's
// repair (rlmm_set_segment_state) raises are the ones the library's own
// writes raise.

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/rstest"
)

// TestEpochEndsOutliveThePurge: two partitions take the same segments, one
// through the library's updates, the other through rlmm_set_segment_state.
// After every step both have the same version and EpochEndOffset gives the
// same answers for epochs 0 to 3, read from the database: a
// COPY_SEGMENT_FINISHED counts the segment's ranges, a finished segment
// that ends lower (an overlapping one) changes nothing, and neither do
// deletes. No write raises a stored end: rlmm_epoch_ends stays empty until
// the purge deletes a finished segment and keeps its ranges' ends there,
// so the answers stay; the partition row's max_segment_span (the bound of
// FirstSegmentForTimestamp's walk) is the longest segment added.
func TestEpochEndsOutliveThePurge(t *testing.T) {
	t.Parallel()
	f := newGuardFixture(t)
	ctx := t.Context()
	library := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "orders", Partition: 0}
	repaired := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "orders", Partition: 0}
	type ends [4]int64 // EpochEndOffset of epochs 0 to 3; -1: none
	answers := func(tp rs.TopicIDPartition) (got ends) {
		t.Helper()
		for e := range got {
			end, ok, err := f.m.EpochEndOffset(ctx, tp, rs.LeaderEpoch(e))
			require.NoError(t, err)
			got[e] = -1
			if ok {
				got[e] = end
			}
		}
		return got
	}
	stored := func(tp rs.TopicIDPartition) (span int64, rows map[int32]int64) {
		t.Helper()
		require.NoError(t, f.pool.QueryRow(ctx, "SELECT max_segment_span FROM rlmm_partitions WHERE topic_id = $1 AND partition = $2",
			tp.TopicID, tp.Partition).Scan(&span))
		r, err := f.pool.Query(ctx, "SELECT epoch, end_offset FROM rlmm_epoch_ends WHERE topic_id = $1 AND partition = $2", tp.TopicID, tp.Partition)
		require.NoError(t, err)
		rows = map[int32]int64{}
		for r.Next() {
			var e int32
			var end int64
			require.NoError(t, r.Scan(&e, &end))
			rows[e] = end
		}
		require.NoError(t, r.Err())
		return span, rows
	}
	type step struct {
		name  string
		start int64
		end   int64
		// epochs of the segment added, or nil: state is applied to the
		// segment of the step named by of.
		epochs map[rs.LeaderEpoch]int64
		state  rs.RemoteLogSegmentState
		of     string
		want   ends
		span   int64
	}
	steps := []step{
		{name: "s1", start: 0, end: 99, epochs: map[rs.LeaderEpoch]int64{0: 0, 1: 20}, state: rs.CopySegmentFinished,
			want: ends{19, 99, -1, -1}, span: 99},
		{name: "s2", start: 100, end: 149, epochs: map[rs.LeaderEpoch]int64{1: 100}, state: rs.CopySegmentFinished,
			want: ends{19, 149, -1, -1}, span: 99},
		// Ends below epoch 1's end and is shorter than the longest segment.
		{name: "s3", start: 50, end: 79, epochs: map[rs.LeaderEpoch]int64{1: 50}, state: rs.CopySegmentFinished,
			want: ends{19, 149, -1, -1}, span: 99},
		{name: "s4", start: 150, end: 549, epochs: map[rs.LeaderEpoch]int64{1: 150, 2: 300}, state: rs.CopySegmentFinished,
			want: ends{19, 299, 549, -1}, span: 399},
		{name: "s4 delete started", of: "s4", state: rs.DeleteSegmentStarted,
			want: ends{19, 299, 549, -1}, span: 399},
		{name: "s4 delete finished", of: "s4", state: rs.DeleteSegmentFinished,
			want: ends{19, 299, 549, -1}, span: 399},
		// Unfinished segments count for nothing, but their length bounds
		// the walk.
		{name: "s5", start: 550, end: 1049, epochs: map[rs.LeaderEpoch]int64{2: 550, 3: 560}, state: rs.CopySegmentStarted,
			want: ends{19, 299, 549, -1}, span: 499},
	}
	added := map[string][2]rs.RemoteLogSegmentMetadata{} // step name -> the segment in library, in repaired
	for _, st := range steps {
		var pair [2]rs.RemoteLogSegmentMetadata
		if st.epochs != nil {
			for i, tp := range []rs.TopicIDPartition{library, repaired} {
				pair[i] = rstest.Segment(tp, st.start, st.end, st.epochs)
				require.NoError(t, f.m.AddRemoteLogSegmentMetadata(ctx, pair[i]), st.name)
			}
			added[st.name] = pair
		} else {
			pair = added[st.of]
		}
		if st.state != rs.CopySegmentStarted {
			require.NoError(t, f.m.UpdateRemoteLogSegmentMetadata(ctx, rstest.Update(pair[0], st.state)), st.name)
			var version int64
			require.NoError(t, f.pool.QueryRow(ctx, "SELECT rlmm_set_segment_state($1, $2, 1, 1)", pair[1].SegmentID.ID, st.state.String()).
				Scan(&version), st.name)
			var lastVersion int64
			require.NoError(t, f.pool.QueryRow(ctx, "SELECT last_version FROM rlmm_segments WHERE segment_id = $1", pair[1].SegmentID.ID).
				Scan(&lastVersion), st.name)
			require.Equal(t, lastVersion, version, "%s: rlmm_set_segment_state returns the segment's last_version", st.name)
		}
		for _, tp := range []rs.TopicIDPartition{library, repaired} {
			require.Equal(t, st.want, answers(tp), "%s: EpochEndOffset of %s", st.name, tp)
			span, rows := stored(tp)
			require.Equal(t, st.span, span, "%s: max_segment_span of %s", st.name, tp)
			require.Empty(t, rows, "%s: a write raised an epoch end of %s", st.name, tp)
		}
		if pair[0].SegmentID.ID != uuid.Nil {
			// The function's bookkeeping is the library's: the same state,
			// finished at the same step.
			var libraryRow, repairedRow [2]any
			for i, row := range []*[2]any{&libraryRow, &repairedRow} {
				require.NoError(t, f.pool.QueryRow(ctx, "SELECT state, finished_version IS NOT NULL FROM rlmm_segments WHERE segment_id = $1",
					pair[i].SegmentID.ID).Scan(&row[0], &row[1]), st.name)
			}
			require.Equal(t, libraryRow, repairedRow, st.name)
		}
	}

	// The purge deletes s4, the one forgotten segment of each partition,
	// and keeps the ends of its ranges.
	var purged int64
	require.NoError(t, f.pool.QueryRow(ctx, "SELECT rlmm_purge(interval '0')").Scan(&purged))
	require.Equal(t, int64(2), purged)
	for _, tp := range []rs.TopicIDPartition{library, repaired} {
		require.Equal(t, ends{19, 299, 549, -1}, answers(tp), "after the purge: EpochEndOffset of %s", tp)
		span, rows := stored(tp)
		require.Equal(t, int64(499), span, "after the purge: max_segment_span of %s", tp)
		require.Equal(t, map[int32]int64{1: 299, 2: 549}, rows, "after the purge: the stored ends of %s", tp)
	}
}
