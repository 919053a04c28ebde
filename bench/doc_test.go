// Package bench_test holds the benchmarks of docs/BENCHMARKS.md, each next
// to the raw statement that bounds it (a primary-key SELECT, a range
// SELECT, two UPDATE commits, an emulation of another store), measured in
// the same run on the same kind of pool, and the tests that keep those
// baselines honest. Run one with go test on this directory:
//
//	go test -run '^$' -bench '^BenchmarkFresh$' -benchtime 3s ./bench
//
// The Makefile's bench-* targets run the usual ones; cmd/rlmmbench, the
// figures at 1M and 10M segments, is a program of its own. The helpers the
// benchmarks share with the root package's tests are in internal/rstest.
package bench_test
