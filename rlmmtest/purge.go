package rlmmtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
)

// Purger is a Manager that purges what is forgotten: both of the package's
// managers are.
type Purger interface {
	rs.Manager
	PurgeForgotten(ctx context.Context, olderThan time.Duration) (int64, error)
	PurgedSegments() int64
}

// purgeFixture is a store with live, forgotten and deleted-partition
// segments, written through a manager and through the model alike.
type purgeFixture struct {
	a, b, c   rs.TopicIDPartition // a: live and forgotten; b: delete finished; c: delete marked
	forgotten []rs.RemoteLogSegmentMetadata
	live      []rs.RemoteLogSegmentMetadata
	model     *Model
}

func newPurgeFixture(t *testing.T, m rs.Manager) *purgeFixture {
	t.Helper()
	ctx := t.Context()
	f := &purgeFixture{a: purgeTP(0), b: purgeTP(1), c: purgeTP(2), model: NewModel(rs.DefaultMaxCustomMetadataBytes)}
	both := func(do func(m rs.Manager) error) {
		t.Helper()
		require.NoError(t, do(f.model))
		require.NoError(t, do(m))
	}
	add := func(tp rs.TopicIDPartition, i int64, states ...rs.RemoteLogSegmentState) rs.RemoteLogSegmentMetadata {
		epochs := map[rs.LeaderEpoch]int64{0: i * 100}
		switch {
		case i == 6:
			epochs = map[rs.LeaderEpoch]int64{0: i * 100, 1: i*100 + 40}
		case i > 6:
			epochs = map[rs.LeaderEpoch]int64{1: i * 100}
		}
		s := purgeSegment(tp, i*100, i*100+99, epochs)
		s.MaxTimestampMs = 1000 + i
		s.TxnIndexEmpty = i%3 != 2
		s.CustomMetadata = []byte(fmt.Sprintf("segment %d", i))
		both(func(m rs.Manager) error { return m.AddRemoteLogSegmentMetadata(ctx, s) })
		for _, st := range states {
			both(func(m rs.Manager) error { return m.UpdateRemoteLogSegmentMetadata(ctx, purgeUpdate(s, st)) })
		}
		return s
	}
	fin, delStart, delFin := rs.CopySegmentFinished, rs.DeleteSegmentStarted, rs.DeleteSegmentFinished
	for i := range int64(12) {
		switch {
		case i < 4:
			f.forgotten = append(f.forgotten, add(f.a, i, fin, delStart, delFin))
		case i == 4:
			f.live = append(f.live, add(f.a, i, fin, delStart))
		case i == 10:
			f.live = append(f.live, add(f.a, i))
		default:
			f.live = append(f.live, add(f.a, i, fin))
		}
	}
	// An id forgotten without ever finishing its copy.
	f.forgotten = append(f.forgotten, add(f.a, 20, delStart, delFin))
	for i := range int64(5) {
		f.forgotten = append(f.forgotten, add(f.b, i, fin))
	}
	for i := range int64(3) {
		f.live = append(f.live, add(f.c, i, fin))
	}
	for _, st := range []rs.RemotePartitionDeleteState{rs.DeletePartitionMarked, rs.DeletePartitionStarted, rs.DeletePartitionFinished} {
		both(func(m rs.Manager) error {
			return m.PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{TopicIDPartition: f.b, State: st, BrokerID: 1})
		})
	}
	both(func(m rs.Manager) error {
		return m.PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{TopicIDPartition: f.c, State: rs.DeletePartitionMarked, BrokerID: 1})
	})
	return f
}

// answers is every query's answer over the fixture's partitions, epochs
// and a grid of offsets.
func (f *purgeFixture) answers(t *testing.T, m rs.Manager) []any {
	t.Helper()
	ctx := t.Context()
	var out []any
	rec := func(what string, vals ...any) { out = append(out, append([]any{what}, vals...)) }
	for _, tp := range []rs.TopicIDPartition{f.a, f.b, f.c} {
		l, err := m.ListRemoteLogSegments(ctx, tp)
		rec("list "+tp.String(), len(l), nonEmpty(l), err)
		for e := range rs.LeaderEpoch(3) {
			l, err := m.ListRemoteLogSegmentsByEpoch(ctx, tp, e)
			rec(fmt.Sprintf("list %s %d", tp, e), len(l), nonEmpty(l), err)
			size, err := m.RemoteLogSize(ctx, tp, e)
			rec(fmt.Sprintf("size %s %d", tp, e), size, err)
			h, ok, err := m.HighestOffsetForEpoch(ctx, tp, e)
			rec(fmt.Sprintf("highest %s %d", tp, e), h, ok, err)
			end, ok, err := m.EpochEndOffset(ctx, tp, e)
			rec(fmt.Sprintf("epoch end %s %d", tp, e), end, ok, err)
			for o := int64(-50); o < 2200; o += 50 {
				s, ok, err := m.RemoteLogSegmentMetadata(ctx, tp, e, o)
				rec(fmt.Sprintf("lookup %s %d %d", tp, e, o), s, ok, err)
				s, ok, err = m.NextSegmentWithTxnIndex(ctx, tp, e, o)
				rec(fmt.Sprintf("txn %s %d %d", tp, e, o), s, ok, err)
				s, ok, err = m.FirstSegmentForTimestamp(ctx, tp, e, 1000+o/200, o)
				rec(fmt.Sprintf("timestamp %s %d %d", tp, e, o), s, ok, err)
			}
		}
	}
	return out
}

// RunPurge checks PurgeForgotten's contract (API.md, "Purging") on the
// manager newManager returns. Unlike Run, it needs a store of its own: a
// purge deletes what every writer forgot. The manager must not purge by
// itself meanwhile (WithForgottenRetention(0), or a retention far longer
// than the test). The answers of every query, compared with the Model's,
// are the same before and after the purge.
func RunPurge(t *testing.T, newManager func(t *testing.T) Purger) {
	t.Helper()
	t.Parallel()
	m := newManager(t)
	ctx := t.Context()
	f := newPurgeFixture(t, m)
	want := f.answers(t, f.model)
	require.Equal(t, want, f.answers(t, m), "before the purge")

	_, err := m.PurgeForgotten(ctx, -time.Second)
	require.Error(t, err, "a negative age")
	require.Contains(t, err.Error(), "negative")

	// Nothing was forgotten an hour ago.
	n, err := m.PurgeForgotten(ctx, time.Hour)
	require.NoError(t, err)
	require.Zero(t, n)
	for _, s := range f.forgotten {
		require.ErrorIs(t, m.AddRemoteLogSegmentMetadata(ctx, s), rs.ErrInvalidAdd, "until purged, a forgotten id stays taken")
	}

	n, err = m.PurgeForgotten(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, int64(len(f.forgotten)), n)
	require.Equal(t, int64(len(f.forgotten)), m.PurgedSegments())
	require.Equal(t, want, f.answers(t, m), "purging changes no query's answer")
	n, err = m.PurgeForgotten(ctx, 0)
	require.NoError(t, err)
	require.Zero(t, n, "purged once")

	for _, s := range f.live {
		require.ErrorIs(t, m.AddRemoteLogSegmentMetadata(ctx, s), rs.ErrInvalidAdd, "a live id stays taken")
	}
	// b's delete record went with its segments: adds work again, and
	// every purged id may be added again, in its partition or another.
	for i, s := range f.forgotten {
		if i%2 == 1 {
			s.SegmentID.TopicIDPartition = f.b
		}
		require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, s), "a purged id may be added again")
		require.NoError(t, m.UpdateRemoteLogSegmentMetadata(ctx, purgeUpdate(s, rs.CopySegmentFinished)))
		s.State = rs.CopySegmentFinished
		got, ok, err := m.RemoteLogSegmentMetadata(ctx, s.SegmentID.TopicIDPartition, firstEpoch(s), s.StartOffset)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, s.SegmentID, got.SegmentID)
	}
	// b has a fresh life: a delete may be recorded again, and c's marked
	// delete was left alone.
	require.NoError(t, m.PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{TopicIDPartition: f.b, State: rs.DeletePartitionMarked}))
	require.ErrorIs(t, m.AddRemoteLogSegmentMetadata(ctx, purgeSegment(f.c, 5000, 5099, map[rs.LeaderEpoch]int64{0: 5000})), rs.ErrInvalidAdd)
}

// nonEmpty is l, or nil when empty (an empty list may come as either).
func nonEmpty(l []rs.RemoteLogSegmentMetadata) []rs.RemoteLogSegmentMetadata {
	if len(l) == 0 {
		return nil
	}
	return l
}

func firstEpoch(s rs.RemoteLogSegmentMetadata) rs.LeaderEpoch {
	first := rs.LeaderEpoch(-1)
	for e := range s.SegmentLeaderEpochs {
		if first < 0 || e < first {
			first = e
		}
	}
	return first
}

func purgeTP(partition int32) rs.TopicIDPartition {
	return rs.TopicIDPartition{TopicID: uuid.New(), Topic: "purge", Partition: partition}
}

func purgeSegment(tp rs.TopicIDPartition, start, end int64, epochs map[rs.LeaderEpoch]int64) rs.RemoteLogSegmentMetadata {
	return rs.RemoteLogSegmentMetadata{
		SegmentID:   rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.New()},
		StartOffset: start, EndOffset: end, SegmentSizeInBytes: 1024,
		State: rs.CopySegmentStarted, SegmentLeaderEpochs: epochs, TxnIndexEmpty: true,
	}
}

func purgeUpdate(s rs.RemoteLogSegmentMetadata, state rs.RemoteLogSegmentState) rs.RemoteLogSegmentMetadataUpdate {
	return rs.RemoteLogSegmentMetadataUpdate{SegmentID: s.SegmentID, State: state, BrokerID: 1, EventTimestampMs: 1}
}
