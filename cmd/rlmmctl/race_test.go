//go:build race

package main

// raceEnabled makes the tests build rlmmctl with the race detector when
// they run with it.
const raceEnabled = true
