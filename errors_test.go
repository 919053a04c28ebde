package remotestorage_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
)

// TestRefusedTransitionsSayWhatTheyFound: a refused update or
// partition-delete event names, through SegmentStateFound and
// PartitionDeleteStateFound, the state it found, on every manager; a
// refusal that read nothing, and any other error, names none.
func TestRefusedTransitionsSayWhatTheyFound(t *testing.T) {
	t.Parallel()
	for name, newM := range map[string]func(t *testing.T) rs.Manager{
		"memory": func(*testing.T) rs.Manager { return rs.NewInMemoryManager() },
		"postgres": func(t *testing.T) rs.Manager {
			return newManager(t, newPool(t, pgtest.NewDatabase(t), 0, false))
		},
		"postgres cached": func(t *testing.T) rs.Manager { return newCachedManager(t, pgtest.NewDatabase(t)) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			m := newM(t)
			tp := testTP(0)
			s := writeFinished(t, m, tp, 0, 99)

			err := m.UpdateRemoteLogSegmentMetadata(ctx, update(s, rs.DeleteSegmentFinished))
			require.ErrorIs(t, err, rs.ErrInvalidSegmentTransition)
			found, ok := rs.SegmentStateFound(err)
			require.True(t, ok, "%v", err)
			require.Equal(t, rs.CopySegmentFinished, found)
			_, ok = rs.SegmentStateFound(errors.Join(errors.New("wrapped"), err))
			require.True(t, ok, "found through a wrapper too")

			err = m.UpdateRemoteLogSegmentMetadata(ctx, update(s, rs.CopySegmentStarted))
			require.ErrorIs(t, err, rs.ErrInvalidSegmentTransition)
			_, ok = rs.SegmentStateFound(err)
			require.False(t, ok, "no segment may move to COPY_SEGMENT_STARTED: refused before the segment is read")

			over := update(s, rs.DeleteSegmentStarted)
			over.CustomMetadata = make([]byte, 1<<20)
			err = m.UpdateRemoteLogSegmentMetadata(ctx, over)
			require.ErrorIs(t, err, rs.ErrInvalidSegmentTransition)
			_, ok = rs.SegmentStateFound(err)
			require.False(t, ok, "custom metadata over the limit is refused before the segment is read")

			err = m.PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{TopicIDPartition: tp, State: rs.DeletePartitionFinished})
			require.ErrorIs(t, err, rs.ErrInvalidPartitionDeleteTransition)
			_, hasRecord, ok := rs.PartitionDeleteStateFound(err)
			require.True(t, ok, "%v", err)
			require.False(t, hasRecord, "no delete record yet")
			require.NoError(t, m.PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{TopicIDPartition: tp, State: rs.DeletePartitionMarked}))
			err = m.PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{TopicIDPartition: tp, State: rs.DeletePartitionFinished})
			state, hasRecord, ok := rs.PartitionDeleteStateFound(err)
			require.True(t, ok && hasRecord, "%v", err)
			require.Equal(t, rs.DeletePartitionMarked, state)

			_, ok = rs.SegmentStateFound(err)
			require.False(t, ok, "a partition-delete refusal names no segment state")
			_, _, ok = rs.PartitionDeleteStateFound(rs.ErrInvalidPartitionDeleteTransition)
			require.False(t, ok, "the bare sentinel names none")
		})
	}
}
