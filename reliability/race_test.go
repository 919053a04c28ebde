//go:build race

package reliability_test

// raceEnabled makes the tests build rlmmd with the race detector when they
// run with it.
const raceEnabled = true
