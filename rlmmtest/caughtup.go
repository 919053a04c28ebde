package rlmmtest

import (
	"testing"

	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
)

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
