package testsignal

import (
	"fmt"
	"sync/atomic"
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

	checks := 0
	s.WaitUntil(t, "three events", func() bool {
		checks++
		if checks > 3 {
			return true
		}
		s.Signal(struct{}{}) // the event the wait that follows this check wakes on
		return false
	})
	require.Equal(t, 4, checks, "a check before the wait and one after each event")
}

// Goroutines waiting on one Signal for states of their own are all woken:
// an event one of them sees is not taken from the others.
func TestSignalWaitUntilWakesEveryWaiter(t *testing.T) {
	t.Parallel()
	var s Signal[int]
	s.Init()
	const waiters = 4
	var reached [waiters]atomic.Bool
	results := make(chan bool, waiters)
	for i := range waiters {
		go func() { results <- s.Until(time.Minute, reached[i].Load) }()
	}
	for i := range waiters {
		reached[i].Store(true)
		s.Signal(i)
	}
	for range waiters {
		require.True(t, <-results, "a waiter missed the event of its state")
	}
}

func TestSignalFailsTheTest(t *testing.T) {
	t.Parallel()
	var s Signal[int]
	tb := &recordingTB{}
	s.WaitOrTimeout(tb)
	require.Len(t, tb.failures, 1)
	require.Contains(t, tb.failures[0], "not initialised")
	tb = &recordingTB{}
	s.WaitUntil(tb, "a state", func() bool { return false })
	require.Len(t, tb.failures, 1)
	require.Contains(t, tb.failures[0], "not initialised")

	s.Init()
	start := time.Now()
	require.False(t, s.Until(20*time.Millisecond, func() bool { return false }))
	require.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)
}
