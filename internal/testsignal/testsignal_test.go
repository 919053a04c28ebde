package testsignal

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// recordingTB records a failure instead of ending the test.
type recordingTB struct{ failures []string }

func (r *recordingTB) Helper() {}
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

func TestSignalIgnoredUntilInit(t *testing.T) {
	t.Parallel()
	var s Signal[int]
	s.Signal(1) // no test listens: dropped
	s.Init()
	s.Signal(2)
	require.Equal(t, 2, s.WaitOrTimeout(t))
}

func TestSignalKeepsOrderAndNeverBlocks(t *testing.T) {
	t.Parallel()
	var s Signal[int]
	s.Init()
	for i := range buffer + 10 { // the ten past the buffer are dropped, not waited for
		s.Signal(i)
	}
	for i := range buffer {
		require.Equal(t, i, s.WaitOrTimeout(t))
	}
	s.Init() // a second Init keeps the signal as it is
	s.Signal(7)
	require.Equal(t, 7, s.WaitOrTimeout(t))
}

func TestSignalWaitUntil(t *testing.T) {
	t.Parallel()
	var s Signal[struct{}]
	s.Init()
	s.WaitUntil(t, "a state already reached", func() bool { return true })

	for range 3 {
		s.Signal(struct{}{})
	}
	checks := 0
	s.WaitUntil(t, "three events", func() bool { checks++; return checks > 3 })
	require.Equal(t, 4, checks, "a check before the wait and one after each event")
}

func TestSignalFailsTheTest(t *testing.T) {
	t.Parallel()
	var s Signal[int]
	tb := &recordingTB{}
	s.WaitOrTimeout(tb)
	require.Len(t, tb.failures, 1)
	require.Contains(t, tb.failures[0], "not initialised")

	s.Init()
	tb = &recordingTB{}
	start := time.Now()
	s.waitUntil(tb, start.Add(20*time.Millisecond), "a state never reached", func() bool { return false })
	require.Len(t, tb.failures, 1)
	require.Contains(t, tb.failures[0], "a state never reached")
	require.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)
}
