// Package testsignal lets code tell its tests that something happened, so
// that a test waits for the event instead of polling for its effect.
//
// A Signal is a field of a struct of test signals that the code under test
// holds. Until a test calls Init it costs one atomic load per Signal call and
// does nothing, so production code pays nothing worth measuring. A test
// calls Init, then WaitOrTimeout, which fails the test when the event does
// not come within one timeout.
//
// Signal never blocks the code under test: when the test has not consumed
// earlier events and the buffer is full, the new event is dropped. A test
// that waits for a state rather than for one event calls WaitUntil, which
// consumes nothing: it checks the state, and again after every event, so
// any number of goroutines may wait on one Signal for states of their own.
package testsignal

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/krabka/remotestorage/internal/testwait"
)

// buffer is how many unconsumed events a Signal keeps.
const buffer = 64

// TB is the part of testing.TB a Signal uses (so that the library does not
// link package testing).
type TB = testwait.TB

// Signal carries events of type T from the code to a test. The zero value
// is ready to use and ignores every event until Init. It is safe for
// concurrent use; Init may run while the code already signals.
type Signal[T any] struct {
	ch atomic.Pointer[chan T]

	mu      sync.Mutex
	changed chan struct{} // closed, and replaced, at every event after Init
}

// Init makes s keep its events from now on, for a test to wait on. A
// second Init keeps the events already buffered.
func (s *Signal[T]) Init() {
	s.mu.Lock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	s.mu.Unlock()
	ch := make(chan T, buffer)
	s.ch.CompareAndSwap(nil, &ch)
}

// Signal records the event val when a test has called Init; otherwise, or
// when the buffer is full, it does nothing. It never blocks.
func (s *Signal[T]) Signal(val T) {
	ch := s.ch.Load()
	if ch == nil {
		return
	}
	select {
	case *ch <- val:
	default:
	}
	s.mu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// WaitOrTimeout returns the oldest event not yet returned, waiting for one
// for at most the tests' one timeout (testwait.Timeout); then it fails tb.
// It fails tb at once when Init was not called.
func (s *Signal[T]) WaitOrTimeout(tb TB) T {
	tb.Helper()
	val, _ := s.wait(tb, time.Now().Add(testwait.Timeout(tb)), "")
	return val
}

// WaitUntil waits until cond holds, checking it first, so that a state
// reached before the wait needs no event, and again after every event. It
// fails tb, naming what, when cond still does not hold after
// testwait.Timeout. It consumes no event.
func (s *Signal[T]) WaitUntil(tb TB, what string, cond func() bool) {
	tb.Helper()
	if !s.initialised() {
		tb.Fatalf("testsignal: waiting for %s on a signal not initialised (call Init first)", what)
		return
	}
	if !s.Until(testwait.Timeout(tb), cond) {
		tb.Fatalf("testsignal: not by the test timeout: %s", what)
	}
}

// Until is WaitUntil for a goroutine that must not fail the test itself (a
// goroutine other than the test's may not call FailNow): it reports whether
// cond held within timeout. Init must have been called.
func (s *Signal[T]) Until(timeout time.Duration, cond func() bool) bool {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		s.mu.Lock()
		changed := s.changed // taken before cond runs, so no event is missed
		s.mu.Unlock()
		if cond() {
			return true
		}
		select {
		case <-changed:
		case <-timer.C:
			return cond()
		}
	}
}

func (s *Signal[T]) initialised() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed != nil
}

// wait returns the oldest event not yet returned, or fails tb at deadline.
func (s *Signal[T]) wait(tb TB, deadline time.Time, what string) (T, bool) {
	tb.Helper()
	var zero T
	if what == "" {
		what = fmt.Sprintf("a %T event", zero)
	}
	ch := s.ch.Load()
	if ch == nil {
		tb.Fatalf("testsignal: waiting for %s on a signal not initialised (call Init first)", what)
		return zero, false
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case val := <-*ch:
		return val, true
	case <-timer.C:
		tb.Fatalf("testsignal: not by the test timeout: %s", what)
		return zero, false
	}
}
