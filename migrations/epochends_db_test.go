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

func requireEpochEnd(t *testing.T, m rs.KafkaExtensions, tp rs.TopicIDPartition, epoch rs.LeaderEpoch, want int64, wantOK bool) {
	t.Helper()
	got, ok, err := m.EpochEndOffset(t.Context(), tp, epoch)
	require.NoError(t, err)
	require.Equal(t, [2]any{want, wantOK}, [2]any{got, ok}, "EpochEndOffset(%s, %d)", tp, epoch)
}

// epochEndRow is a row of rlmm_epoch_ends, without its partition.
type epochEndRow struct {
	Epoch                                    int32
	EndOffset, MaxSegmentSpan, RaisedVersion int64
}

// TestRepairedFinishRaisesEpochEnds: two partitions take the same
// segments, one through the library's updates, the other through
// rlmm_set_segment_state. After every step both have the same version and
// the same epoch ends (end offset, longest segment, and the version that
// raised them): a COPY_SEGMENT_FINISHED raises them to the segment's
// ranges, a finished segment that ends lower (an overlapping one) lowers
// and restamps nothing, and deletes leave them as they were.
func TestRepairedFinishRaisesEpochEnds(t *testing.T) {
	t.Parallel()
	f := newGuardFixture(t)
	ctx := t.Context()
	library := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "orders", Partition: 0}
	repaired := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "orders", Partition: 0}
	epochEnds := func(tp rs.TopicIDPartition) (version int64, rows []epochEndRow) {
		t.Helper()
		require.NoError(t, f.pool.QueryRow(ctx, "SELECT version FROM rlmm_partitions WHERE topic_id = $1 AND partition = $2",
			tp.TopicID, tp.Partition).Scan(&version))
		r, err := f.pool.Query(ctx, `SELECT epoch, end_offset, max_segment_span, raised_version FROM rlmm_epoch_ends
			WHERE topic_id = $1 AND partition = $2 ORDER BY epoch`, tp.TopicID, tp.Partition)
		require.NoError(t, err)
		for r.Next() {
			var e epochEndRow
			require.NoError(t, r.Scan(&e.Epoch, &e.EndOffset, &e.MaxSegmentSpan, &e.RaisedVersion))
			rows = append(rows, e)
		}
		require.NoError(t, r.Err())
		return version, rows
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
		want   []epochEndRow
	}
	steps := []step{
		{name: "s1", start: 0, end: 99, epochs: map[rs.LeaderEpoch]int64{0: 0, 1: 20}, state: rs.CopySegmentFinished,
			want: []epochEndRow{{0, 19, 99, 2}, {1, 99, 99, 2}}},
		{name: "s2", start: 100, end: 149, epochs: map[rs.LeaderEpoch]int64{1: 100}, state: rs.CopySegmentFinished,
			want: []epochEndRow{{0, 19, 99, 2}, {1, 149, 99, 4}}},
		// Ends below epoch 1's end and is shorter than the longest segment.
		{name: "s3", start: 50, end: 79, epochs: map[rs.LeaderEpoch]int64{1: 50}, state: rs.CopySegmentFinished,
			want: []epochEndRow{{0, 19, 99, 2}, {1, 149, 99, 4}}},
		{name: "s4", start: 150, end: 549, epochs: map[rs.LeaderEpoch]int64{1: 150, 2: 300}, state: rs.CopySegmentFinished,
			want: []epochEndRow{{0, 19, 99, 2}, {1, 299, 399, 8}, {2, 549, 399, 8}}},
		{name: "s4 delete started", of: "s4", state: rs.DeleteSegmentStarted,
			want: []epochEndRow{{0, 19, 99, 2}, {1, 299, 399, 8}, {2, 549, 399, 8}}},
		{name: "s4 delete finished", of: "s4", state: rs.DeleteSegmentFinished,
			want: []epochEndRow{{0, 19, 99, 2}, {1, 299, 399, 8}, {2, 549, 399, 8}}},
		// Unfinished segments raise nothing.
		{name: "s5", start: 550, end: 599, epochs: map[rs.LeaderEpoch]int64{2: 550, 3: 560}, state: rs.CopySegmentStarted,
			want: []epochEndRow{{0, 19, 99, 2}, {1, 299, 399, 8}, {2, 549, 399, 8}}},
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
			require.Equal(t, rstest.PartitionVersion(t, f.pool, repaired), version, st.name)
		}
		libraryVersion, libraryEnds := epochEnds(library)
		repairedVersion, repairedEnds := epochEnds(repaired)
		require.Equal(t, st.want, libraryEnds, "%s: the library's epoch ends", st.name)
		require.Equal(t, libraryVersion, repairedVersion, "%s: the versions", st.name)
		require.Equal(t, libraryEnds, repairedEnds, "%s: the repaired partition's epoch ends against the library's", st.name)
	}
	for _, tp := range []rs.TopicIDPartition{library, repaired} {
		requireEpochEnd(t, f.m, tp, 0, 19, true)
		requireEpochEnd(t, f.m, tp, 1, 299, true)
		requireEpochEnd(t, f.m, tp, 2, 549, true)
		requireEpochEnd(t, f.m, tp, 3, 0, false)
	}
}
