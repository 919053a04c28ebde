package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage/internal/testwait"
	pb "github.com/krabka/remotestorage/proto/remotestorage/v1"
)

// BenchmarkLookup is the lookup a broker's fetch from the remote tier makes
// (RemoteLogSegmentMetadata), answered from the cache of a PgManager with
// WithCache: called in process, and through rlmmd over gRPC on loopback, at
// 1 and 8 callers, on a partition of 1,000 finished segments. It reports p50
// and p99 per lookup.
//
//	go test -run '^$' -bench BenchmarkLookup -benchtime 20000x ./cmd/rlmmd
func BenchmarkLookup(b *testing.B) {
	bundle := startDaemonTB(b, nil)
	ctx := context.Background()
	tp := newTP()
	rtp, err := tpFrom(tp)
	require.NoError(b, err)
	_, err = bundle.client.OnPartitionLeadershipChanges(ctx, &pb.OnPartitionLeadershipChangesRequest{Leaders: []*pb.TopicIdPartition{tp}})
	require.NoError(b, err)
	const segments = 1000
	for i := range segments {
		s := newSegment(tp, int64(i*100), int64(i*100+99), &pb.EpochStart{Epoch: 0, StartOffset: int64(i * 100)})
		_, err := bundle.client.AddSegment(ctx, &pb.AddSegmentRequest{Segment: s})
		require.NoError(b, err)
		_, err = bundle.client.UpdateSegment(ctx, &pb.UpdateSegmentRequest{Update: &pb.SegmentUpdate{Id: s.Id, State: pb.SegmentState_SEGMENT_STATE_COPY_SEGMENT_FINISHED, BrokerId: 1}})
		require.NoError(b, err)
	}
	testwait.Until(b, "the cache caught up", func() bool {
		up, err := bundle.d.manager.CaughtUp(ctx, rtp)
		return err == nil && up
	})
	lookups := map[string]func(off int64) error{
		"library": func(off int64) error {
			_, found, err := bundle.d.manager.RemoteLogSegmentMetadata(ctx, rtp, 0, off)
			if err == nil && !found {
				err = fmt.Errorf("no segment for %d", off)
			}
			return err
		},
		"rlmmd": func(off int64) error {
			resp, err := bundle.client.GetSegment(ctx, &pb.GetSegmentRequest{TopicIdPartition: tp, Epoch: 0, Offset: off})
			if err == nil && resp.Segment == nil {
				err = fmt.Errorf("no segment for %d", off)
			}
			return err
		},
	}
	for _, via := range []string{"library", "rlmmd"} {
		for _, callers := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/callers=%d", via, callers), func(b *testing.B) {
				lookup := lookups[via]
				per := max(1, b.N/callers)
				lat := make([][]time.Duration, callers)
				errs := make([]error, callers)
				var wg sync.WaitGroup
				b.ResetTimer()
				for c := range callers {
					wg.Go(func() {
						rnd := rand.New(rand.NewPCG(uint64(c), 1))
						lat[c] = make([]time.Duration, 0, per)
						for range per {
							off := rnd.Int64N(segments * 100)
							t0 := time.Now()
							if err := lookup(off); err != nil {
								errs[c] = err
								return
							}
							lat[c] = append(lat[c], time.Since(t0))
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				var all []time.Duration
				for c := range callers {
					require.NoError(b, errs[c])
					all = append(all, lat[c]...)
				}
				slices.Sort(all)
				b.ReportMetric(float64(all[len(all)/2].Nanoseconds())/1e3, "p50-µs")
				b.ReportMetric(float64(all[len(all)*99/100].Nanoseconds())/1e3, "p99-µs")
			})
		}
	}
}
