package testwait_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage/internal/testwait"
)

// recorder stands in for a test: it records a failure instead of stopping
// the goroutine, and has the deadline the test gives it.
type recorder struct {
	testing.TB
	deadline time.Time
	failed   []string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = append(r.failed, fmt.Sprintf(format, args...))
}

func (r *recorder) Deadline() (time.Time, bool) { return r.deadline, !r.deadline.IsZero() }

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	took := testwait.Until(t, "the third call", func() bool { return calls.Add(1) >= 3 })
	require.EqualValues(t, 3, calls.Load())
	require.Positive(t, took)
}

func TestUntilFailsNamingWhatItAwaited(t *testing.T) {
	t.Parallel()
	r := &recorder{TB: t, deadline: time.Now().Add(300 * time.Millisecond)}
	start := time.Now()
	testwait.Until(r, "the condition that never holds", func() bool { return false })
	require.Len(t, r.failed, 1)
	require.True(t, strings.Contains(r.failed[0], "the condition that never holds"), "the failure names what was awaited: %q", r.failed[0])
	require.Less(t, time.Since(start), 300*time.Millisecond, "the wait gave up before the test's deadline")
}

func TestTimeout(t *testing.T) {
	t.Setenv(testwait.ScaleEnv, "")
	r := &recorder{TB: t}
	require.Equal(t, time.Minute, testwait.Timeout(r), "the base timeout")

	t.Setenv(testwait.ScaleEnv, "2.5")
	require.Equal(t, 150*time.Second, testwait.Timeout(r), "scaled")

	r.deadline = time.Now().Add(time.Minute)
	got := testwait.Timeout(r)
	require.Less(t, got, time.Minute, "capped by the test's deadline, with a margin")
	require.Greater(t, got, 50*time.Second)

	r.deadline = time.Now().Add(-time.Second)
	require.Zero(t, testwait.Timeout(r), "past the deadline: no time to wait")
	require.Empty(t, r.failed)

	for _, bad := range []string{"fast", "0", "-1", "NaN"} {
		t.Setenv(testwait.ScaleEnv, bad)
		r := &recorder{TB: t}
		testwait.Timeout(r)
		require.Len(t, r.failed, 1, bad)
		require.Contains(t, r.failed[0], testwait.ScaleEnv, bad)
		require.Contains(t, r.failed[0], bad)
	}
}
