package main

// walk.go: peak memory of walking one large partition with the slice list
// and with the stream. Each walk runs in a fresh child process (this binary
// with -walk-child), which reports its peak live heap (what the garbage
// collector found reachable, sampled every millisecond from runtime/metrics,
// with a collection at the end of the walk while its result is still held),
// its peak heap objects (live and dead not yet swept: this one follows the
// collector's pacing, GOGC, more than what the walk keeps) and its maximum
// resident set size (VmHWM); an idle child that only connects gives the floor.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	rs "github.com/krabka/remotestorage"
)

type walkResult struct {
	Mode      string  `json:"mode"`
	Size      int     `json:"size"`
	Segments  int     `json:"segments"`
	PeakLive  uint64  `json:"peak_live_heap_bytes"`
	PeakHeap  uint64  `json:"peak_heap_objects_bytes"`
	MaxRSS    int64   `json:"max_rss_bytes"`
	Seconds   float64 `json:"seconds"`
	TotalHeap uint64  `json:"allocated_bytes"`
}

var walkModes = []string{"idle", "slice", "stream"}

func walkShapeOf(size int) shape { return newShape("walk"+strconv.Itoa(size), size, size) }

func runWalks(ctx context.Context, cfg config, srv *server) ([]walkResult, []planCheck, error) {
	var shapes []shape
	for _, size := range cfg.walkSizes {
		shapes = append(shapes, walkShapeOf(size))
	}
	db, drop, err := prepareDatabase(ctx, cfg, srv, "rlmmbench_walk", shapes...)
	if drop != nil {
		defer drop()
	}
	if err != nil {
		return nil, nil, err
	}
	var plans []planCheck
	admin, err := openAdmin(ctx, db.dsn)
	if err != nil {
		return nil, nil, err
	}
	defer admin.Close()
	for _, size := range cfg.walkSizes {
		pc, err := checkStreamPlan(ctx, admin, walkShapeOf(size).tp(0))
		if err != nil {
			return nil, nil, err
		}
		plans = append(plans, pc)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	var out []walkResult
	for _, size := range cfg.walkSizes {
		for _, mode := range walkModes {
			cmd := exec.CommandContext(ctx, exe, "-walk-child", mode, "-walk-dsn", db.dsn,
				"-walk-shape", walkShapeOf(size).name, "-walk-size", strconv.Itoa(size))
			cmd.Stderr = os.Stderr
			b, err := cmd.Output()
			if err != nil {
				return nil, nil, fmt.Errorf("walk %s %d: %w", mode, size, err)
			}
			var res walkResult
			if err := json.Unmarshal(b, &res); err != nil {
				return nil, nil, fmt.Errorf("walk %s %d: %w: %q", mode, size, err, b)
			}
			logf("  walk %-6s %7d segments: peak live heap %6.1f MiB, heap objects %6.1f MiB, max RSS %6.1f MiB, %.2fs",
				mode, res.Segments, mib(res.PeakLive), mib(res.PeakHeap), mib(uint64(res.MaxRSS)), res.Seconds)
			out = append(out, res)
		}
	}
	return out, plans, nil
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// walkChild is the child side: walk, then print the result as JSON.
func walkChild(ctx context.Context, cfg config) error {
	pool, err := pgxpool.New(ctx, cfg.walkDSN)
	if err != nil {
		return err
	}
	defer pool.Close()
	m, err := rs.NewPgManager(ctx, pool)
	if err != nil {
		return err
	}
	tp := newShape(cfg.walkShape, cfg.walkSize, cfg.walkSize).tp(0)
	if _, err := m.CaughtUp(ctx, tp); err != nil { // connect and prepare outside the walk
		return err
	}

	var peakLive, peakObjects uint64
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	read := func() {
		metrics.Read(sample)
		peakLive = max(peakLive, sample[0].Value.Uint64())
		peakObjects = max(peakObjects, sample[1].Value.Uint64())
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			read()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	allocs := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(allocs)
	allocBefore := allocs[0].Value.Uint64()

	begin := time.Now()
	n := 0
	var sizeSum int64
	switch cfg.walkChild {
	case "idle":
	case "slice":
		list, err := m.ListRemoteLogSegments(ctx, tp)
		if err != nil {
			return err
		}
		for _, s := range list {
			sizeSum += int64(s.SegmentSizeInBytes)
			n++
		}
		// A walk too short for the collector to run in still counts
		// what it holds at its end.
		runtime.GC()
		runtime.KeepAlive(list)
	case "stream":
		for s, err := range m.RemoteLogSegments(ctx, tp) {
			if err != nil {
				return err
			}
			sizeSum += int64(s.SegmentSizeInBytes)
			n++
		}
		runtime.GC()
	default:
		return fmt.Errorf("-walk-child %q: want idle, slice or stream", cfg.walkChild)
	}
	elapsed := time.Since(begin)
	close(done)
	wg.Wait()
	read()
	metrics.Read(allocs)
	if cfg.walkChild != "idle" && n != cfg.walkSize {
		return fmt.Errorf("walked %d segments, want %d", n, cfg.walkSize)
	}
	_ = sizeSum
	return json.NewEncoder(os.Stdout).Encode(walkResult{
		Mode: cfg.walkChild, Size: cfg.walkSize, Segments: n, PeakLive: peakLive, PeakHeap: peakObjects, MaxRSS: peakResident(),
		Seconds: elapsed.Seconds(), TotalHeap: allocs[0].Value.Uint64() - allocBefore,
	})
}

// peakResident is the process's peak resident set, VmHWM from
// /proc/self/status. (getrusage's ru_maxrss would not do: across exec Linux
// keeps the parent's high-water mark.)
func peakResident() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
