// Package reliability_test proves what the store promises when things go
// wrong: linearizability of many brokers under faults, durability across a
// crash, bounded reconnection through outages, refusal of bad input, and
// agreement with the in-memory reference over long random runs.
//
// The tests that take the server down start a PostgreSQL cluster of their own
// (package pgcluster), so no other test sees the fault; the others use a
// database of the shared test server (package pgtest). The fault tests are
// not parallel, so each can check that it leaked no goroutine; the pure ones
// are. docs/RELIABILITY.md reports the figures these tests log.
//
// Environment: RELIABILITY_SOAK=1 makes the randomized runs longer (make
// reliability-soak); RLMMTEST_SEED fixes the seed of the random runs.
package reliability_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/krabka/remotestorage/internal/pgtest"
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "reliability-bin-")
	if err != nil {
		panic(err)
	}
	binDir = dir
	code := pgtest.Run(m)
	_ = os.RemoveAll(dir) // a temporary directory: nothing to do if it stays
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "reliability: goroutines leaked: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
