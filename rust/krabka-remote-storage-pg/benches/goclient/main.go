// Command goclient is a Go gRPC client of rlmmd running the Rust bench's
// workload (benches/rlmmd.rs) against the same rlmmd, for comparison; with
// -dsn, also the writes through the Go library in process (PgManager on
// rlmmd's database), the bound of any client of rlmmd. Its own module, so
// that the repository's Go module and its targets leave it out.
package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	rs "github.com/krabka/remotestorage"
	pb "github.com/krabka/remotestorage/proto/remotestorage/v1"
)

func tp() *pb.TopicIdPartition {
	id := make([]byte, 16)
	rand.Read(id)
	return &pb.TopicIdPartition{TopicId: id, Topic: "conformance", Partition: 0}
}

func seg(t *pb.TopicIdPartition, start, end int64) *pb.Segment {
	id := make([]byte, 16)
	rand.Read(id)
	return &pb.Segment{Id: &pb.SegmentId{TopicIdPartition: t, Id: id}, StartOffset: start, EndOffset: end, MaxTimestampMs: 1000 + end, BrokerId: 1, EventTimestampMs: 10, SegmentSizeInBytes: 100,
		State: pb.SegmentState_SEGMENT_STATE_COPY_SEGMENT_STARTED, SegmentLeaderEpochs: []*pb.EpochStart{{Epoch: 0, StartOffset: start}}, TxnIndexEmpty: true}
}

func main() {
	target := flag.String("target", "", "")
	total := flag.Int("lookups", 20000, "")
	secs := flag.Int("secs", 5, "")
	dsn := flag.String("dsn", "", "rlmmd's database: also run the writes through the Go library in process")
	flag.Parse()
	conn, err := grpc.NewClient(*target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	c := pb.NewRemoteLogMetadataServiceClient(conn)
	ctx := context.Background()
	call := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 10*time.Second) }
	for _, callers := range []int{1, 8} {
		t := tp()
		cctx, cancel := call()
		if _, err := c.OnPartitionLeadershipChanges(cctx, &pb.OnPartitionLeadershipChangesRequest{Leaders: []*pb.TopicIdPartition{t}}); err != nil {
			panic(err)
		}
		cancel()
		for i := range 1000 {
			s := seg(t, int64(i*100), int64(i*100+99))
			cctx, cancel := call()
			if _, err := c.AddSegment(cctx, &pb.AddSegmentRequest{Segment: s}); err != nil {
				panic(err)
			}
			if _, err := c.UpdateSegment(cctx, &pb.UpdateSegmentRequest{Update: &pb.SegmentUpdate{Id: s.Id, State: pb.SegmentState_SEGMENT_STATE_COPY_SEGMENT_FINISHED, BrokerId: 1, EventTimestampMs: 1}}); err != nil {
				panic(err)
			}
			cancel()
		}
		for {
			cctx, cancel := call()
			r, err := c.CaughtUp(cctx, &pb.CaughtUpRequest{TopicIdPartition: t})
			cancel()
			if err == nil && r.CaughtUp {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		per := *total / callers
		lat := make([][]time.Duration, callers)
		var wg sync.WaitGroup
		for w := range callers {
			wg.Go(func() {
				rnd := mrand.New(mrand.NewPCG(uint64(w), 1))
				look := func() time.Duration {
					off := rnd.Int64N(100000)
					t0 := time.Now()
					cctx, cancel := call()
					r, err := c.GetSegment(cctx, &pb.GetSegmentRequest{TopicIdPartition: t, Epoch: 0, Offset: off})
					cancel()
					d := time.Since(t0)
					if err != nil || r.Segment == nil {
						panic(fmt.Sprint(err))
					}
					return d
				}
				for range 2000 / callers {
					look()
				}
				for range per {
					lat[w] = append(lat[w], look())
				}
			})
		}
		wg.Wait()
		var all []time.Duration
		for _, l := range lat {
			all = append(all, l...)
		}
		slices.Sort(all)
		fmt.Printf("go client: cached lookup, %d caller(s), %d lookups: p50 %.0f µs, p99 %.0f µs\n", callers, *total, float64(all[len(all)/2].Microseconds()), float64(all[len(all)*99/100].Microseconds()))
	}
	until := time.Now().Add(time.Duration(*secs) * time.Second)
	start := time.Now()
	var mu sync.Mutex
	pairs := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			t := tp()
			n := 0
			for time.Now().Before(until) {
				s := seg(t, int64(n*10), int64(n*10+9))
				cctx, cancel := call()
				if _, err := c.AddSegment(cctx, &pb.AddSegmentRequest{Segment: s}); err != nil {
					panic(err)
				}
				if _, err := c.UpdateSegment(cctx, &pb.UpdateSegmentRequest{Update: &pb.SegmentUpdate{Id: s.Id, State: pb.SegmentState_SEGMENT_STATE_COPY_SEGMENT_FINISHED, BrokerId: 1, EventTimestampMs: 1}}); err != nil {
					panic(err)
				}
				cancel()
				n++
			}
			mu.Lock()
			pairs += n
			mu.Unlock()
		})
	}
	wg.Wait()
	fmt.Printf("go client: add + finish, 8 callers, %d s: %.0f pairs/s\n", *secs, float64(pairs)/time.Since(start).Seconds())
	if *dsn != "" {
		fmt.Printf("go library in process: add + finish, 8 goroutines, %d s: %.0f pairs/s\n", *secs, libraryWrites(*dsn, *secs))
	}
}

// libraryWrites runs the bench's writes through PgManager itself, on a
// pool of 8 connections: add + finish pairs per second from 8 goroutines,
// each on a partition of its own.
func libraryWrites(dsn string, secs int) float64 {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		panic(err)
	}
	cfg.MaxConns = 8
	rs.ConfigurePool(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	m, err := rs.NewPgManager(ctx, pool)
	if err != nil {
		panic(err)
	}
	defer m.Close()
	until := time.Now().Add(time.Duration(secs) * time.Second)
	start := time.Now()
	var mu sync.Mutex
	pairs := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			t := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "conformance"}
			n := 0
			for time.Now().Before(until) {
				s := rs.RemoteLogSegmentMetadata{
					SegmentID:   rs.RemoteLogSegmentID{TopicIDPartition: t, ID: uuid.New()},
					StartOffset: int64(n * 10), EndOffset: int64(n*10 + 9), MaxTimestampMs: int64(1000 + n*10 + 9),
					BrokerID: 1, EventTimestampMs: 10, SegmentSizeInBytes: 100, State: rs.CopySegmentStarted,
					SegmentLeaderEpochs: map[rs.LeaderEpoch]int64{0: int64(n * 10)}, TxnIndexEmpty: true,
				}
				if err := m.AddRemoteLogSegmentMetadata(ctx, s); err != nil {
					panic(err)
				}
				if err := m.UpdateRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadataUpdate{
					SegmentID: s.SegmentID, State: rs.CopySegmentFinished, BrokerID: 1, EventTimestampMs: 1,
				}); err != nil {
					panic(err)
				}
				n++
			}
			mu.Lock()
			pairs += n
			mu.Unlock()
		})
	}
	wg.Wait()
	return float64(pairs) / time.Since(start).Seconds()
}
