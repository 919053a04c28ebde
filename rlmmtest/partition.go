package rlmmtest

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
)

func (s *suite) partitionDelete(t *testing.T) {
	s.run(t, "full_flow", func(e *env) {
		tp := e.newTP()
		a := e.addFinished(tp, 0, 9, nil)
		b := e.addSegment(tp, 10, 19, nil)
		c := e.addFinished(tp, 20, 29, nil)
		e.to(&c, rs.DeleteSegmentStarted)

		e.mustPutDelete(tp, rs.DeletePartitionMarked)
		requireSentinel(e.t, e.m.AddRemoteLogSegmentMetadata(e.ctx, e.segment(tp, 30, 39, nil)), rs.ErrInvalidAdd, "add once MARKED")
		e.to(&b, rs.CopySegmentFinished)
		e.requireSegmentsAsStored(tp, a, b, c)

		e.mustPutDelete(tp, rs.DeletePartitionStarted)
		requireSentinel(e.t, e.m.AddRemoteLogSegmentMetadata(e.ctx, e.segment(tp, 30, 39, nil)), rs.ErrInvalidAdd, "add once STARTED")
		e.to(&a, rs.DeleteSegmentStarted)
		e.to(&c, rs.DeleteSegmentFinished)
		e.requireSegmentsAsStored(tp, a, b, c)

		e.mustPutDelete(tp, rs.DeletePartitionFinished)
		e.requireForgotten(tp, a, b, c)
		requireSentinel(e.t, e.m.AddRemoteLogSegmentMetadata(e.ctx, e.segment(tp, 30, 39, nil)), rs.ErrInvalidAdd, "add once FINISHED")
		// The forgotten ids stay taken, anywhere.
		for _, seg := range []rs.RemoteLogSegmentMetadata{a, b, c} {
			again := e.segment(e.newTP(), 0, 9, nil)
			again.SegmentID.ID = seg.SegmentID.ID
			requireSentinel(e.t, e.m.AddRemoteLogSegmentMetadata(e.ctx, again), rs.ErrInvalidAdd, "id of a deleted partition's segment")
		}
	})

	s.run(t, "adds_refused_once_marked", func(e *env) {
		tp := e.newTP()
		e.addFinished(tp, 0, 9, nil)
		for _, st := range deleteStates {
			e.mustPutDelete(tp, st)
			bad := e.segment(tp, 100, 109, nil)
			requireSentinel(e.t, e.m.AddRemoteLogSegmentMetadata(e.ctx, bad), rs.ErrInvalidAdd, "add in %s", st)
			for _, seg := range e.list(tp) {
				require.NotEqual(e.t, bad.SegmentID.ID, seg.SegmentID.ID)
			}
		}
	})

	s.run(t, "updates_allowed_while_marked_and_started", func(e *env) {
		tp := e.newTP()
		a := e.addSegment(tp, 0, 9, nil)
		b := e.addSegment(tp, 10, 19, nil)
		e.mustPutDelete(tp, rs.DeletePartitionMarked)
		e.to(&a, rs.CopySegmentFinished)
		e.to(&b, rs.DeleteSegmentStarted)
		e.requireSegmentsAsStored(tp, a, b)
		e.mustPutDelete(tp, rs.DeletePartitionStarted)
		e.to(&a, rs.CopySegmentFinished)
		e.to(&a, rs.DeleteSegmentStarted)
		e.to(&b, rs.DeleteSegmentFinished)
		e.requireSegmentsAsStored(tp, a, b)
		// Refused transitions are still refused.
		requireSentinel(e.t, e.m.UpdateRemoteLogSegmentMetadata(e.ctx, e.updateFor(a, rs.CopySegmentFinished)), rs.ErrInvalidSegmentTransition)
		e.requireSegmentsAsStored(tp, a, b)
	})

	s.run(t, "finished_forgets_everything", func(e *env) {
		tp := e.newTP()
		a := e.addFinished(tp, 0, 99, epochs{0: 0, 1: 50})
		b := e.addSegment(tp, 100, 199, epochs{1: 100})
		c := e.addFinished(tp, 200, 299, epochs{1: 200})
		e.to(&c, rs.DeleteSegmentStarted)
		e.mustPutDelete(tp, rs.DeletePartitionMarked, rs.DeletePartitionStarted, rs.DeletePartitionFinished)
		e.requireForgotten(tp, a, b, c)
	})

	s.run(t, "idempotent_retries", func(e *env) {
		tp := e.newTP()
		a := e.addFinished(tp, 0, 9, nil)
		e.mustPutDelete(tp, rs.DeletePartitionMarked, rs.DeletePartitionMarked, rs.DeletePartitionMarked)
		e.requirePartitionDeleteState(tp, rs.DeletePartitionMarked, true, a)
		e.mustPutDelete(tp, rs.DeletePartitionStarted, rs.DeletePartitionStarted)
		e.requirePartitionDeleteState(tp, rs.DeletePartitionStarted, true, a)
		e.mustPutDelete(tp, rs.DeletePartitionFinished, rs.DeletePartitionFinished)
		e.requirePartitionDeleteState(tp, rs.DeletePartitionFinished, true, a)
	})

	s.run(t, "invalid_transitions", func(e *env) {
		tp := e.newTP()
		a := e.addFinished(tp, 0, 9, nil)
		bad := func(to rs.RemotePartitionDeleteState) {
			e.t.Helper()
			requireSentinel(e.t, e.putDelete(tp, to), rs.ErrInvalidPartitionDeleteTransition, "to %s", deleteStateName(to, true))
		}
		bad(rs.DeletePartitionStarted) // none -> STARTED
		bad(rs.DeletePartitionFinished)
		bad(7)
		e.requirePartitionDeleteState(tp, 0, false, a)
		// requirePartitionDeleteState added a segment as its last probe.
		tp = e.newTP()
		a = e.addFinished(tp, 0, 9, nil)
		e.mustPutDelete(tp, rs.DeletePartitionMarked)
		bad(rs.DeletePartitionFinished) // MARKED -> FINISHED
		bad(-1)
		e.requirePartitionDeleteState(tp, rs.DeletePartitionMarked, true, a)
		e.mustPutDelete(tp, rs.DeletePartitionStarted)
		bad(rs.DeletePartitionMarked) // backward
		e.requirePartitionDeleteState(tp, rs.DeletePartitionStarted, true, a)
		e.mustPutDelete(tp, rs.DeletePartitionFinished)
		bad(rs.DeletePartitionMarked) // FINISHED -> MARKED
		bad(rs.DeletePartitionStarted)
		bad(3)
		e.requirePartitionDeleteState(tp, rs.DeletePartitionFinished, true, a)
	})

	s.run(t, "other_partition_unaffected", func(e *env) {
		tp := e.newTP()
		p1 := withPartition(tp, 1)
		other := e.newTP()
		a := e.addFinished(tp, 0, 9, nil)
		b := e.addFinished(p1, 0, 9, nil)
		c := e.addFinished(other, 0, 9, nil)
		e.mustPutDelete(tp, rs.DeletePartitionMarked)
		d := e.addFinished(p1, 10, 19, nil)
		e.mustPutDelete(tp, rs.DeletePartitionStarted, rs.DeletePartitionFinished)
		e.requireForgotten(tp, a)
		e.requireSegmentsAsStored(p1, b, d)
		e.requireSegmentsAsStored(other, c)
		e.to(&b, rs.DeleteSegmentStarted)
		f := e.addFinished(p1, 20, 29, nil)
		e.requireSegmentsAsStored(p1, b, d, f)
		e.requireHighest(p1, 0, 29, true)
		// p1 has its own, empty, delete state.
		e.requirePartitionDeleteState(p1, 0, false, b, d, f)
	})

	s.run(t, "partition_never_written_can_be_marked", func(e *env) {
		tp := e.newTP()
		e.mustPutDelete(tp, rs.DeletePartitionMarked)
		e.requirePartitionDeleteState(tp, rs.DeletePartitionMarked, true)
	})
}

// requireForgotten checks that tp answers as if it had no segments at all and
// that the given segments can no longer be updated.
func (e *env) requireForgotten(tp rs.TopicIDPartition, segs ...rs.RemoteLogSegmentMetadata) {
	e.t.Helper()
	e.requireList(tp)
	for _, seg := range segs {
		for ep, start := range seg.SegmentLeaderEpochs {
			e.requireListByEpoch(tp, ep)
			e.requireLookup(tp, ep, start, nil)
			e.requireLookup(tp, ep, seg.EndOffset, nil)
			e.requireHighest(tp, ep, 0, false)
			e.requireSize(tp, ep, 0)
			e.requireNextTxn(tp, ep, start, nil)
		}
		for _, to := range []rs.RemoteLogSegmentState{rs.CopySegmentFinished, rs.DeleteSegmentStarted, rs.DeleteSegmentFinished} {
			requireSentinel(e.t, e.m.UpdateRemoteLogSegmentMetadata(e.ctx, e.updateFor(seg, to)), rs.ErrSegmentNotFound, "update of a forgotten segment to %s", to)
		}
	}
}

func (s *suite) caughtUp(t *testing.T) {
	check := func(e *env, tp rs.TopicIDPartition) {
		e.t.Helper()
		ok, err := e.m.CaughtUp(e.ctx, tp)
		require.NoError(e.t, err)
		require.True(e.t, ok, "CaughtUp(%s)", tp)
	}
	s.run(t, "known_partition", func(e *env) {
		tp := e.newTP()
		e.addFinished(tp, 0, 9, nil)
		check(e, tp)
	})
	s.run(t, "unknown_partition", func(e *env) {
		check(e, e.newTP())
	})
	s.run(t, "deleted_partition", func(e *env) {
		tp := e.newTP()
		e.addFinished(tp, 0, 9, nil)
		e.mustPutDelete(tp, rs.DeletePartitionMarked, rs.DeletePartitionStarted, rs.DeletePartitionFinished)
		check(e, tp)
	})
}

func (s *suite) defensiveCopies(t *testing.T) {
	s.run(t, "add_input", func(e *env) {
		tp := e.newTP()
		seg := e.segment(tp, 0, 99, epochs{0: 0, 1: 50})
		seg.CustomMetadata = []byte("original")
		e.add(seg)
		want := cloneSegment(seg)
		seg.CustomMetadata[0] = 'X'
		seg.SegmentLeaderEpochs[1] = 60
		seg.SegmentLeaderEpochs[2] = 90
		delete(seg.SegmentLeaderEpochs, 0)
		e.requireList(tp, want)
		e.to(&want, rs.CopySegmentFinished)
		e.requireLookup(tp, 1, 50, &want)
		e.requireLookup(tp, 0, 0, &want)
	})

	s.run(t, "update_input", func(e *env) {
		tp := e.newTP()
		seg := e.addSegment(tp, 0, 99, nil)
		u := e.updateFor(seg, rs.CopySegmentFinished)
		u.CustomMetadata = []byte("updated")
		require.NoError(e.t, e.m.UpdateRemoteLogSegmentMetadata(e.ctx, u))
		want := applyUpdate(seg, u)
		u.CustomMetadata[0] = 'X'
		e.requireList(tp, want)
		e.requireLookup(tp, 0, 0, &want)
	})

	s.run(t, "query_results", func(e *env) {
		tp := e.newTP()
		seg := e.segment(tp, 0, 99, epochs{0: 0, 1: 50})
		seg.CustomMetadata = []byte("original")
		seg.TxnIndexEmpty = false
		e.add(seg)
		e.to(&seg, rs.CopySegmentFinished)
		spoil := func(got rs.RemoteLogSegmentMetadata) {
			if len(got.CustomMetadata) > 0 {
				got.CustomMetadata[0] = 'X'
			}
			got.SegmentLeaderEpochs[1] = 70
			got.SegmentLeaderEpochs[7] = 99
		}
		check := func() {
			e.t.Helper()
			e.requireList(tp, seg)
			e.requireListByEpoch(tp, 1, seg)
			e.requireLookup(tp, 1, 50, &seg)
			e.requireNextTxn(tp, 1, 50, &seg)
		}
		got, ok, err := e.m.RemoteLogSegmentMetadata(e.ctx, tp, 1, 50)
		require.NoError(e.t, err)
		require.True(e.t, ok)
		spoil(got)
		check()
		for _, l := range [][]rs.RemoteLogSegmentMetadata{e.list(tp), e.listByEpoch(tp, 1)} {
			require.Len(e.t, l, 1)
			spoil(l[0])
			check()
		}
		got, ok, err = e.m.NextSegmentWithTxnIndex(e.ctx, tp, 1, 50)
		require.NoError(e.t, err)
		require.True(e.t, ok)
		spoil(got)
		check()
	})
}

func (s *suite) identity(t *testing.T) {
	s.run(t, "topic_name_not_part_of_identity", func(e *env) {
		// API.md: identity is (TopicID, Partition); Topic is kept for DBAs.
		tp := e.newTP()
		seg := e.addSegment(tp, 0, 99, nil)
		renamed := tp
		renamed.Topic = tp.Topic + "-renamed"
		listed := e.list(renamed)
		require.Len(e.t, listed, 1, "list naming the partition by another topic name")
		require.Equal(e.t, seg.SegmentID.ID, listed[0].SegmentID.ID)
		u := e.updateFor(seg, rs.CopySegmentFinished)
		u.SegmentID.TopicIDPartition = renamed
		require.NoError(e.t, e.m.UpdateRemoteLogSegmentMetadata(e.ctx, u), "update naming the partition by another topic name")
		got, ok, err := e.m.RemoteLogSegmentMetadata(e.ctx, renamed, 0, 50)
		require.NoError(e.t, err)
		require.True(e.t, ok)
		require.Equal(e.t, seg.SegmentID.ID, got.SegmentID.ID)
		e.requireHighest(renamed, 0, 99, true)
		// The same id under the new name is the same id.
		again := cloneSegment(seg)
		again.SegmentID.TopicIDPartition = renamed
		requireSentinel(e.t, e.m.AddRemoteLogSegmentMetadata(e.ctx, again), rs.ErrInvalidAdd)
		// A partition delete under another name deletes the partition.
		e.mustPutDelete(renamed, rs.DeletePartitionMarked)
		requireSentinel(e.t, e.m.AddRemoteLogSegmentMetadata(e.ctx, e.segment(tp, 100, 199, nil)), rs.ErrInvalidAdd)
	})
}

func (s *suite) options(t *testing.T) {
	t.Run("default_custom_metadata_limit", func(t *testing.T) {
		e := s.envWith(t) // no options: the default limit
		tp := e.newTP()
		seg := e.segment(tp, 0, 9, nil)
		seg.CustomMetadata = bytes.Repeat([]byte{'d'}, defaultCustomMetadataLimit+1)
		requireSentinel(e.t, e.m.AddRemoteLogSegmentMetadata(e.ctx, seg), rs.ErrInvalidAdd)
		seg.CustomMetadata = bytes.Repeat([]byte{'d'}, defaultCustomMetadataLimit)
		e.add(seg)
		u := e.updateFor(seg, rs.CopySegmentFinished)
		u.CustomMetadata = bytes.Repeat([]byte{'u'}, defaultCustomMetadataLimit+1)
		requireSentinel(e.t, e.m.UpdateRemoteLogSegmentMetadata(e.ctx, u), rs.ErrInvalidSegmentTransition)
		e.requireSegmentsAsStored(tp, seg)
		u.CustomMetadata = u.CustomMetadata[:defaultCustomMetadataLimit]
		require.NoError(e.t, e.m.UpdateRemoteLogSegmentMetadata(e.ctx, u))
		e.requireSegmentsAsStored(tp, applyUpdate(seg, u))
	})
}
