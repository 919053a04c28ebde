package main

// The tests run the real rlmmctl binary, built once per test run, against
// databases from pgtest (one server per test binary, a fresh database per
// test). Help and usage checks, which need no database, call run directly.
// The helpers the tests share are in helpers_test.go.

import (
	"os"
	"testing"

	"github.com/krabka/remotestorage/internal/pgtest"
)

// buildDir holds the binary; TestMain removes it.
var buildDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rlmmctl-test-")
	if err != nil {
		panic(err)
	}
	buildDir = dir
	code := pgtest.Run(m)
	_ = os.RemoveAll(dir) // a temporary directory: nothing to do if it stays
	os.Exit(code)
}
