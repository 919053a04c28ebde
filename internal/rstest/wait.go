package rstest

import (
	"context"
	"errors"
	"testing"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/testwait"
)

// Loaded reports whether m's cache has loaded partition tp: CaughtUp no
// longer fails with rs.ErrNotReady. A partition the cache does not follow
// counts as loaded: ask after OnPartitionLeadershipChanges took tp on.
func Loaded(m *rs.PgManager, tp rs.TopicIDPartition) bool {
	_, err := m.CaughtUp(context.Background(), tp)
	return !errors.Is(err, rs.ErrNotReady)
}

// WaitLoaded waits until m's cache has loaded partition tp, polling Loaded
// (testwait.Until), and fails the test when it does not within the tests'
// timeout. While the partition loads CaughtUp answers from the cache, so the
// polls send no statement until the last one.
func WaitLoaded(t testing.TB, m *rs.PgManager, tp rs.TopicIDPartition) {
	t.Helper()
	testwait.Until(t, "partition "+tp.String()+" loaded", func() bool { return Loaded(m, tp) })
}
