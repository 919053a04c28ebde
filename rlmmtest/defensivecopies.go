package rlmmtest

import (
	"testing"

	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
)

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
