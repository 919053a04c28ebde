package partition

import "testing"

// benchPartition holds n finished single-epoch segments: segment i holds
// offsets [100i, 100i+99] of epoch i/100, as bench/'s partitions do.
func benchPartition(n int) *Partition {
	p := New()
	for i := range int64(n) {
		p.Store(finished(100*i, 100*i+99, i+1, EpochStart{Epoch: int32(i / 100), Start: 100 * i}))
	}
	return p
}

// BenchmarkLookup is the offset lookup of a partition of 1,000 segments
// whose index is built: what a cached lookup costs before the public copy.
func BenchmarkLookup(b *testing.B) {
	p := benchPartition(1000)
	p.Lookup(0, 0) // build the index
	b.ReportAllocs()
	i := int64(0)
	for b.Loop() {
		i = (i + 7919) % 100_000
		if _, ok := p.Lookup(int32(i/10_000), i); !ok {
			b.Fatal("the lookup missed")
		}
	}
}
