package rlmmtest

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
)

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
