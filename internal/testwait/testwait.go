// Package testwait is the one way tests wait for something that must
// happen: a condition polled until it holds, under one timeout that
// TESTWAIT_SCALE scales and the test binary's deadline caps
// (docs/TESTING.md, "Waiting in tests").
//
// It does not import package testing, so that the library's test signals
// (package testsignal) can share the timeout without linking it.
package testwait

import (
	"os"
	"strconv"
	"time"
)

// TB is the part of testing.TB that testwait uses. A *testing.T, B or F
// is one; so is anything with these methods, such as a stand-in that
// records the failure in a test of a helper.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// ScaleEnv names the environment variable that scales the timeout.
const ScaleEnv = "TESTWAIT_SCALE"

// base is the timeout before scaling: long enough for a machine as busy as
// CI's, with the race detector.
const base = time.Minute

// poll is how often Until checks its condition.
const poll = 2 * time.Millisecond

// margin is how long before the test binary's deadline a wait gives up.
const margin = 5 * time.Second

// Timeout returns how long a test waits for something that must happen:
// the base minute times TESTWAIT_SCALE, capped by the test's deadline (when
// t has a Deadline method, as a *testing.T has). It fails the test when
// TESTWAIT_SCALE is not a positive number.
func Timeout(t TB) time.Duration {
	t.Helper()
	d := base
	if v := os.Getenv(ScaleEnv); v != "" {
		scale, err := strconv.ParseFloat(v, 64)
		if err != nil || !(scale > 0) || scale > 1e6 {
			t.Fatalf("%s=%q: want a positive number, the factor that scales the test timeout of %v", ScaleEnv, v, base)
		}
		d = time.Duration(float64(base) * scale)
	}
	if dt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if deadline, ok := dt.Deadline(); ok {
			left := time.Until(deadline)
			left -= min(margin, left/10)
			d = max(min(d, left), 0)
		}
	}
	return d
}

// Until polls cond every few milliseconds, in the calling goroutine, until
// it returns true, and returns how long that took. When it has not
// returned true within Timeout, Until fails the test with a message naming
// what, the thing awaited.
func Until(t TB, what string, cond func() bool) time.Duration {
	t.Helper()
	timeout := Timeout(t)
	start := time.Now()
	for !cond() {
		if time.Since(start) >= timeout {
			t.Fatalf("waited %v for %s", timeout, what)
			return time.Since(start) // t.Fatalf stops the test; a stand-in for testing.TB might not
		}
		time.Sleep(poll)
	}
	return time.Since(start)
}
