package remotestorage_test

import (
	"testing"

	"github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/rlmmtest"
)

func TestInMemoryManagerConformance(t *testing.T) {
	rlmmtest.Run(t, func(t *testing.T, opts ...remotestorage.Option) rlmmtest.Manager {
		return remotestorage.NewInMemoryManager(opts...)
	})
}
