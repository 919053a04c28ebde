package remotestorage_test

// conformance_test.go: every run of the conformance suite (rlmmtest.Run) on
// the package's managers, in each of their configurations. The helpers of
// the cached and PgBouncer runs live beside the tests of those features
// (pgcache_test.go, pgbouncer_test.go).

import (
	"testing"

	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/rlmmtest"
)

func TestInMemoryManagerConformance(t *testing.T) {
	t.Parallel()
	rlmmtest.Run(t, func(t *testing.T, opts ...rs.Option) rs.Manager {
		return rs.NewInMemoryManager(opts...)
	})
}

func TestPgManagerConformance(t *testing.T) {
	t.Parallel()
	// The suite's subtests use fresh random topic and segment ids, so they
	// share one database (a clone per subtest costs 0.2-1 s here), each with
	// a manager of its own.
	pool := pgtest.NewPool(t)
	rlmmtest.Run(t, func(t *testing.T, opts ...rs.Option) rs.Manager {
		m, err := rs.NewPgManager(t.Context(), pool, opts...)
		require.NoError(t, err)
		t.Cleanup(m.Close)
		return m
	})
}

// The conformance suite, answered from the cache.
func TestCachedPgManagerConformance(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	rlmmtest.Run(t, func(t *testing.T, opts ...rs.Option) rs.Manager {
		return &consumingManager{PgManager: newCachedManager(t, dsn, opts...), t: t, seen: map[[20]byte]bool{}}
	})
}

func TestPgBouncerConformance(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewBouncerPool(t)
	rlmmtest.Run(t, func(t *testing.T, opts ...rs.Option) rs.Manager {
		m, err := rs.NewPgManager(t.Context(), pool, opts...)
		require.NoError(t, err)
		t.Cleanup(m.Close)
		return m
	})
}

// The conformance suite answered from caches whose queries and writes go
// through PgBouncer and whose listener has a session connection of its own.
func TestPgBouncerCachedConformance(t *testing.T) {
	t.Parallel()
	pooled, direct := pgtest.NewBouncerDatabase(t)
	listener := listenerOption(t, direct)
	rlmmtest.Run(t, func(t *testing.T, opts ...rs.Option) rs.Manager {
		return &consumingManager{PgManager: newCachedManager(t, pooled, append(opts, listener)...), t: t, seen: map[[20]byte]bool{}}
	})
}
