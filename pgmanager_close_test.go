package remotestorage_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/testwait"
)

// Close may be called more than once, whether or not the manager ever
// wrote (a manager that never wrote has never started its notification
// sender), with or without the cache: each Close returns.
func TestPgManagerCloseTwice(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.NewPool(t)
	for _, tc := range []struct {
		name  string
		write bool
		opts  []rs.Option
	}{
		{"never wrote", false, nil},
		{"never wrote, cached", false, []rs.Option{rs.WithCache()}},
		{"wrote", true, nil},
	} {
		m, err := rs.NewPgManager(ctx, pool, tc.opts...)
		require.NoError(t, err)
		if tc.write {
			tp := testTP(0)
			require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, segment(tp, 0, 9, map[rs.LeaderEpoch]int64{0: 0})))
		}
		closed := make(chan struct{})
		go func() {
			defer close(closed)
			m.Close()
			m.Close()
		}()
		select {
		case <-closed:
		case <-time.After(testwait.Timeout(t)): // only keeps a hang from blocking the suite
			t.Fatalf("%s: a second Close did not return", tc.name)
		}
	}
}
