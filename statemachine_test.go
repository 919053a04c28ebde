package remotestorage

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// The tables of API.md, written out as the spec, against statemachine.go.
func TestSegmentTransitionsMatchAPI(t *testing.T) {
	const (
		cs, cf, ds, df = CopySegmentStarted, CopySegmentFinished, DeleteSegmentStarted, DeleteSegmentFinished
	)
	want := map[[2]RemoteLogSegmentState]bool{
		{cs, cf}: true, {cs, ds}: true,
		{cf, cf}: true, {cf, ds}: true,
		{ds, ds}: true, {ds, df}: true,
		{df, df}: true,
	}
	states := []RemoteLogSegmentState{cs, cf, ds, df, -1, 4, 7}
	for _, from := range states {
		for _, to := range states {
			require.Equal(t, want[[2]RemoteLogSegmentState{from, to}], SegmentTransitionAllowed(from, to), "%s to %s", from, to)
		}
	}
	require.Equal(t, []RemoteLogSegmentState{cs, cf}, AllowedSegmentFromStates(cf))
	require.Equal(t, []RemoteLogSegmentState{cs, cf, ds}, AllowedSegmentFromStates(ds))
	require.Equal(t, []RemoteLogSegmentState{ds, df}, AllowedSegmentFromStates(df))
	require.Empty(t, AllowedSegmentFromStates(cs), "nothing moves to COPY_SEGMENT_STARTED")
	require.Empty(t, AllowedSegmentFromStates(7))
	require.Empty(t, AllowedSegmentFromStates(-1))
}

func TestPartitionDeleteTransitionsMatchAPI(t *testing.T) {
	const m, s, f = DeletePartitionMarked, DeletePartitionStarted, DeletePartitionFinished
	type from struct {
		state RemotePartitionDeleteState
		has   bool
	}
	want := map[from][]RemotePartitionDeleteState{
		{0, false}: {m},
		{m, true}:  {m, s},
		{s, true}:  {s, f},
		{f, true}:  {f},
	}
	for fr, allowed := range want {
		for _, to := range []RemotePartitionDeleteState{m, s, f, -1, 3} {
			require.Equal(t, slices.Contains(allowed, to), PartitionDeleteTransitionAllowed(fr.state, fr.has, to), "%v to %s", fr, to)
		}
	}
	for _, to := range []RemotePartitionDeleteState{m, s, f} {
		stored, none := allowedPartitionDeleteFromStates(to)
		require.Equal(t, to == m, none, to.String())
		for _, st := range []RemotePartitionDeleteState{m, s, f} {
			require.Equal(t, slices.Contains(want[from{st, true}], to), slices.Contains(stored, st), "%s to %s", st, to)
		}
	}
}

func TestStateNames(t *testing.T) {
	require.Equal(t, "COPY_SEGMENT_STARTED", CopySegmentStarted.String())
	require.Equal(t, "COPY_SEGMENT_FINISHED", CopySegmentFinished.String())
	require.Equal(t, "DELETE_SEGMENT_STARTED", DeleteSegmentStarted.String())
	require.Equal(t, "DELETE_SEGMENT_FINISHED", DeleteSegmentFinished.String())
	require.Equal(t, "DELETE_PARTITION_MARKED", DeletePartitionMarked.String())
	require.Equal(t, "DELETE_PARTITION_STARTED", DeletePartitionStarted.String())
	require.Equal(t, "DELETE_PARTITION_FINISHED", DeletePartitionFinished.String())
	require.Equal(t, "RemoteLogSegmentState(9)", RemoteLogSegmentState(9).String())
}
