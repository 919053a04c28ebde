package rlmmtest_test

import (
	"testing"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/rlmmtest"
)

// TestModelConformance runs the suite against the model itself: the suite's
// hand-written expectations and the model must agree.
func TestModelConformance(t *testing.T) {
	rlmmtest.Run(t, func(t *testing.T, opts ...rs.Option) rlmmtest.Manager {
		// The suite passes either no option (default limit) or exactly
		// WithMaxCustomMetadataBytes(CustomMetadataLimit).
		if len(opts) == 0 {
			return rlmmtest.NewModel(65536)
		}
		return rlmmtest.NewModel(rlmmtest.CustomMetadataLimit)
	})
}
