package remotestorage

// In the package itself (not remotestorage_test) so that the streams can be
// walked with small pages; TestMain (pgmanager_test.go) serves this file too.

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/testwait"
)

// streamingManager is a manager with its streams at a chosen page size.
type streamingManager struct {
	RemoteLogMetadataManager
	all     func(ctx context.Context, tp TopicIDPartition, pageSize int) iter.Seq2[RemoteLogSegmentMetadata, error]
	byEpoch func(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch, pageSize int) iter.Seq2[RemoteLogSegmentMetadata, error]
	// consume makes the manager consume tp before the test writes to it
	// (the cached PgManager then answers tp from memory).
	consume func(t *testing.T, tp TopicIDPartition)
}

// streamingManagers returns a fresh InMemoryManager, a PgManager on a fresh
// database, and a PgManager with a cache on the same database.
func streamingManagers(t *testing.T) map[string]streamingManager {
	t.Helper()
	mem := NewInMemoryManager()
	pool := pgtest.NewPool(t)
	pg, err := NewPgManager(t.Context(), pool)
	require.NoError(t, err)
	t.Cleanup(pg.Close)
	cached, err := NewPgManager(t.Context(), pool, WithCache())
	require.NoError(t, err)
	t.Cleanup(cached.Close)
	nothing := func(*testing.T, TopicIDPartition) {}
	return map[string]streamingManager{
		"memory":   {mem, mem.remoteLogSegments, mem.remoteLogSegmentsByEpoch, nothing},
		"postgres": {pg, pg.remoteLogSegments, pg.remoteLogSegmentsByEpoch, nothing},
		"postgres-cache": {cached, cached.remoteLogSegments, cached.remoteLogSegmentsByEpoch, func(t *testing.T, tp TopicIDPartition) {
			require.NoError(t, cached.OnPartitionLeadershipChanges(t.Context(), []TopicIDPartition{tp}, nil))
			testwait.Until(t, "the cache loaded "+tp.String(), func() bool {
				ok, err := cached.CaughtUp(t.Context(), tp)
				return err == nil && ok
			})
		}},
	}
}

// collect walks a stream to its end and fails the test on an error.
func collect(t *testing.T, seq iter.Seq2[RemoteLogSegmentMetadata, error]) []RemoteLogSegmentMetadata {
	t.Helper()
	out := []RemoteLogSegmentMetadata{}
	for s, err := range seq {
		require.NoError(t, err)
		out = append(out, s)
	}
	return out
}

// requireSameList compares a slice list with a collected stream; an empty
// list may be nil.
func requireSameList(t *testing.T, list, streamed []RemoteLogSegmentMetadata, msgAndArgs ...any) {
	t.Helper()
	if len(list) == 0 {
		require.Empty(t, streamed, msgAndArgs...)
		return
	}
	require.Equal(t, list, streamed, msgAndArgs...)
}

func iterTestTP(partition int32) TopicIDPartition {
	return TopicIDPartition{TopicID: uuid.New(), Topic: "iter-test", Partition: partition}
}

// fillIterPartition adds segments in every state, several that start at the
// same offset (ties in list order, across page boundaries at small page
// sizes), multi-epoch segments and a forgotten one; it returns the epochs used.
func fillIterPartition(t *testing.T, m RemoteLogMetadataManager, tp TopicIDPartition) []LeaderEpoch {
	t.Helper()
	ctx := t.Context()
	states := []RemoteLogSegmentState{CopySegmentFinished, CopySegmentStarted, DeleteSegmentStarted, DeleteSegmentFinished}
	for i := range 40 {
		start := int64(i/3) * 100 // three segments per start offset
		epoch := LeaderEpoch(i / 10)
		epochs := map[LeaderEpoch]int64{epoch: start}
		if i%10 == 9 {
			epochs[epoch+1] = start + 50
		}
		s := RemoteLogSegmentMetadata{
			SegmentID:           RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.New()},
			StartOffset:         start,
			EndOffset:           start + 99,
			SegmentSizeInBytes:  int32(1000 + i),
			CustomMetadata:      []byte(fmt.Sprintf("segment %d", i)),
			State:               CopySegmentStarted,
			SegmentLeaderEpochs: epochs,
			TxnIndexEmpty:       i%2 == 0,
		}
		require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, s))
		target := states[i%len(states)]
		path := map[RemoteLogSegmentState][]RemoteLogSegmentState{
			CopySegmentStarted:    nil,
			CopySegmentFinished:   {CopySegmentFinished},
			DeleteSegmentStarted:  {CopySegmentFinished, DeleteSegmentStarted},
			DeleteSegmentFinished: {DeleteSegmentStarted, DeleteSegmentFinished},
		}[target]
		for _, state := range path {
			require.NoError(t, m.UpdateRemoteLogSegmentMetadata(ctx, RemoteLogSegmentMetadataUpdate{
				SegmentID: s.SegmentID, State: state, BrokerID: 2, EventTimestampMs: int64(i),
			}))
		}
	}
	return []LeaderEpoch{0, 1, 2, 3, 4, 99}
}

// runFilledStreams runs test on each streaming manager, in a subtest named
// after it, on partition tp filled by fillIterPartition with epochs.
func runFilledStreams(t *testing.T, test func(t *testing.T, name string, m streamingManager, tp TopicIDPartition, epochs []LeaderEpoch)) {
	for name, m := range streamingManagers(t) {
		t.Run(name, func(t *testing.T) {
			tp := iterTestTP(0)
			m.consume(t, tp)
			test(t, name, m, tp, fillIterPartition(t, m, tp))
		})
	}
}

// TestSegmentStreamsMatchLists walks both streams of both managers at several
// page sizes and compares them with the slice lists.
func TestSegmentStreamsMatchLists(t *testing.T) {
	t.Parallel()
	runFilledStreams(t, func(t *testing.T, name string, m streamingManager, tp TopicIDPartition, epochs []LeaderEpoch) {
		ctx := t.Context()
		for _, pageSize := range []int{1, 2, 3, 7, listPageSize} {
			list, err := m.ListRemoteLogSegments(ctx, tp)
			require.NoError(t, err)
			require.Len(t, list, 30) // 40 added, 10 forgotten
			requireSameList(t, list, collect(t, m.all(ctx, tp, pageSize)), "page size %d", pageSize)
			for _, epoch := range epochs {
				list, err := m.ListRemoteLogSegmentsByEpoch(ctx, tp, epoch)
				require.NoError(t, err)
				requireSameList(t, list, collect(t, m.byEpoch(ctx, tp, epoch, pageSize)), "epoch %d, page size %d", epoch, pageSize)
			}
		}
		// An unknown partition streams nothing, and so does a deleted one.
		unknown := iterTestTP(1)
		m.consume(t, unknown)
		require.Empty(t, collect(t, m.all(ctx, unknown, 2)))
		for _, state := range []RemotePartitionDeleteState{DeletePartitionMarked, DeletePartitionStarted, DeletePartitionFinished} {
			require.NoError(t, m.PutRemotePartitionDeleteMetadata(ctx, RemotePartitionDeleteMetadata{TopicIDPartition: tp, State: state}))
		}
		require.Empty(t, collect(t, m.all(ctx, tp, 2)))
		require.Empty(t, collect(t, m.byEpoch(ctx, tp, 1, 2)))
	})
}

// TestSegmentStreamsEarlyBreak stops a walk midway: the stream yields the
// list's prefix, and the loop body may call the manager (no lock or
// connection is held across yields).
func TestSegmentStreamsEarlyBreak(t *testing.T) {
	t.Parallel()
	runFilledStreams(t, func(t *testing.T, name string, m streamingManager, tp TopicIDPartition, epochs []LeaderEpoch) {
		ctx := t.Context()
		list, err := m.ListRemoteLogSegments(ctx, tp)
		require.NoError(t, err)
		var added int64
		for _, stop := range []int{1, 4, 5, 29} {
			var got []RemoteLogSegmentMetadata
			for s, err := range m.all(ctx, tp, 4) {
				require.NoError(t, err)
				// A write from inside the loop must not deadlock. It
				// adds after every listed segment, so the prefix holds.
				added++
				require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, RemoteLogSegmentMetadata{
					SegmentID:   RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.New()},
					StartOffset: 50_000 + added, EndOffset: 50_000 + added, State: CopySegmentStarted,
					SegmentLeaderEpochs: map[LeaderEpoch]int64{9: 50_000 + added},
				}))
				got = append(got, s)
				if len(got) == stop {
					break
				}
			}
			require.Equal(t, list[:stop], got)
		}
		if pg, ok := m.RemoteLogMetadataManager.(*PgManager); ok && pg.cache == nil {
			require.Zero(t, pg.pool.Stat().AcquiredConns(), "a broken-off stream holds a connection")
		}
	})
}

// TestSegmentStreamsContextCancel cancels the context midway and before the
// start: the stream then yields one error matching context.Canceled and stops.
func TestSegmentStreamsContextCancel(t *testing.T) {
	t.Parallel()
	runFilledStreams(t, func(t *testing.T, name string, m streamingManager, tp TopicIDPartition, epochs []LeaderEpoch) {
		for _, cancelAfter := range []int{0, 1, 3, 4} {
			ctx, cancel := context.WithCancel(t.Context())
			if cancelAfter == 0 {
				cancel()
			}
			var items, errs int
			var lastErr error
			for _, err := range m.all(ctx, tp, 3) {
				if err != nil {
					errs++
					lastErr = err
					continue // a stream must stop after its error
				}
				items++
				if items == cancelAfter {
					cancel()
				}
			}
			cancel()
			require.Equal(t, cancelAfter, items)
			require.Equal(t, 1, errs)
			require.ErrorIs(t, lastErr, context.Canceled)
			if name != "memory" {
				require.ErrorIs(t, lastErr, ErrIO)
			}
		}
	})
}

// TestSegmentStreamsConcurrentAdds adds segments while a walk is under way:
// every segment visible throughout is yielded exactly once, in list order.
func TestSegmentStreamsConcurrentAdds(t *testing.T) {
	t.Parallel()
	runFilledStreams(t, func(t *testing.T, name string, m streamingManager, tp TopicIDPartition, epochs []LeaderEpoch) {
		ctx := t.Context()
		before, err := m.ListRemoteLogSegments(ctx, tp)
		require.NoError(t, err)
		seen := map[uuid.UUID]int{}
		var last RemoteLogSegmentMetadata
		for s, err := range m.all(ctx, tp, 2) {
			require.NoError(t, err)
			seen[s.SegmentID.ID]++
			require.GreaterOrEqual(t, s.StartOffset, last.StartOffset)
			last = s
			if len(seen) > 10 {
				continue
			}
			// A segment that sorts before the cursor and one after it.
			for _, start := range []int64{0, 10_000 + int64(len(seen))} {
				require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, RemoteLogSegmentMetadata{
					SegmentID:   RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.New()},
					StartOffset: start, EndOffset: start + 5, State: CopySegmentStarted,
					SegmentLeaderEpochs: map[LeaderEpoch]int64{9: start},
				}))
			}
		}
		for _, s := range before {
			require.Equal(t, 1, seen[s.SegmentID.ID], "segment at %d", s.StartOffset)
		}
		for id, n := range seen {
			require.Equal(t, 1, n, "segment %s yielded %d times", id, n)
		}
	})
}

// TestSegmentStreamsStoreFailure closes the pool under a PgManager: the
// stream yields one ErrIO and stops.
func TestSegmentStreamsStoreFailure(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	m, err := NewPgManager(t.Context(), pool)
	require.NoError(t, err)
	tp := iterTestTP(0)
	fillIterPartition(t, m, tp)
	pool.Close()
	for _, seq := range []iter.Seq2[RemoteLogSegmentMetadata, error]{
		m.RemoteLogSegments(t.Context(), tp), m.RemoteLogSegmentsByEpoch(t.Context(), tp, 1),
	} {
		var errs []error
		for s, err := range seq {
			require.Zero(t, s)
			errs = append(errs, err)
		}
		require.Len(t, errs, 1)
		require.ErrorIs(t, errs[0], ErrIO)
		require.False(t, errors.Is(errs[0], context.Canceled))
	}
}
