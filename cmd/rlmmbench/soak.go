package main

// soak.go: a long run of mixed traffic (90% lookups, 10% writes) at a fixed
// number of clients, reported per window: do the percentiles drift, does
// memory grow?

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	rs "github.com/krabka/remotestorage"
)

// soakWindow is what one reporting window saw.
type soakWindow struct {
	lookups, writes *hdrhistogram.Histogram
	all             *hdrhistogram.Histogram
	errors          int64
	firstErr        error
	maxHeap         uint64
	maxRSS          uint64
	goroutines      int
	dbBytes         int64
}

func runSoak(ctx context.Context, cfg config, srv *server) error {
	started := time.Now()
	loadStart := loadAverage()
	s := newShape("bench", cfg.segments, cfg.perPartition)
	db, drop, err := prepareDatabase(ctx, cfg, srv, fmt.Sprintf("rlmmbench_%d", s.segments()), s)
	if drop != nil {
		defer drop()
	}
	if err != nil {
		return err
	}
	admin, err := openAdmin(ctx, db.dsn)
	if err != nil {
		return err
	}
	defer admin.Close()
	pool, _, err := openPool(ctx, db.dsn, cfg.soakClients)
	if err != nil {
		return err
	}
	defer pool.Close()
	m, err := rs.NewPgManager(ctx, pool)
	if err != nil {
		return err
	}
	w := newWorkload(s, s.partitions)
	reads := w.readOps(m)
	lookups := []opFunc{reads[0].run, reads[0].run, reads[0].run, reads[0].run, reads[0].run, reads[0].run,
		reads[1].run, reads[2].run, reads[3].run} // two thirds hits, the rest the three kinds of miss

	// One write in ten: an add, then the update that finishes it.
	client := func(ctx context.Context, rng *rand.Rand, pending *rs.RemoteLogSegmentID) (write bool, err error) {
		if rng.IntN(10) != 0 {
			_, err := lookups[rng.IntN(len(lookups))](ctx, rng)
			return false, err
		}
		if pending.ID != [16]byte{} {
			err := m.UpdateRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadataUpdate{
				SegmentID: *pending, State: rs.CopySegmentFinished, BrokerID: 1, EventTimestampMs: baseTimestampMs,
			})
			*pending = rs.RemoteLogSegmentID{}
			return true, err
		}
		seg := w.newSegment(rng)
		if err := m.AddRemoteLogSegmentMetadata(ctx, seg); err != nil {
			return true, err
		}
		*pending = seg.SegmentID
		return true, nil
	}

	// Warm up, then measure window by window.
	logf("soak: %d clients for %s, windows of %s", cfg.soakClients, cfg.soakDuration, cfg.soakWindow)
	warmEnd := time.Now().Add(cfg.warmup)
	var wg sync.WaitGroup
	for c := range cfg.soakClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 1))
			var pending rs.RemoteLogSegmentID
			for time.Now().Before(warmEnd) && ctx.Err() == nil {
				_, _ = client(ctx, rng, &pending)
			}
		}()
	}
	wg.Wait()

	nWindows := int((cfg.soakDuration + cfg.soakWindow - 1) / cfg.soakWindow)
	windows := make([]soakWindow, nWindows)
	for i := range windows {
		windows[i].lookups, windows[i].writes, windows[i].all = newHistogram(), newHistogram(), newHistogram()
	}
	var winMu sync.Mutex
	begin := time.Now()
	end := begin.Add(cfg.soakDuration)
	windowOf := func(t time.Time) int { return min(nWindows-1, int(t.Sub(begin)/cfg.soakWindow)) }

	// Memory and database size, sampled every second.
	samplerDone := make(chan struct{})
	var samplerWG sync.WaitGroup
	samplerWG.Add(1)
	go func() {
		defer samplerWG.Done()
		heap := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-samplerDone:
				return
			case <-t.C:
			}
			metrics.Read(heap)
			rss := residentBytes()
			var dbBytes int64
			_ = admin.QueryRow(ctx, "SELECT pg_database_size(current_database())").Scan(&dbBytes)
			winMu.Lock()
			win := &windows[windowOf(time.Now())]
			win.maxHeap = max(win.maxHeap, heap[0].Value.Uint64())
			win.maxRSS = max(win.maxRSS, rss)
			win.goroutines = max(win.goroutines, runtime.NumGoroutine())
			win.dbBytes = max(win.dbBytes, dbBytes)
			winMu.Unlock()
		}
	}()

	for c := range cfg.soakClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 2))
			var pending rs.RemoteLogSegmentID
			for ctx.Err() == nil {
				t0 := time.Now()
				if !t0.Before(end) {
					return
				}
				write, err := client(ctx, rng, &pending)
				d := int64(time.Since(t0))
				winMu.Lock()
				win := &windows[windowOf(t0)]
				_ = win.all.RecordValue(d)
				if write {
					_ = win.writes.RecordValue(d)
				} else {
					_ = win.lookups.RecordValue(d)
				}
				if err != nil {
					if win.errors == 0 {
						win.firstErr = err
					}
					win.errors++
				}
				winMu.Unlock()
			}
		}()
	}
	ticker := time.NewTicker(cfg.soakWindow)
	for done := false; !done; {
		select {
		case <-ticker.C:
			i := max(0, windowOf(time.Now())-1)
			winMu.Lock()
			win := windows[i]
			logf("  window %d: %.0f lookups/s p99 %s, %.0f writes/s p99 %s, heap %.1f MiB, RSS %.1f MiB",
				i+1, float64(win.lookups.TotalCount())/cfg.soakWindow.Seconds(), fmtDur(time.Duration(win.lookups.ValueAtQuantile(99))),
				float64(win.writes.TotalCount())/cfg.soakWindow.Seconds(), fmtDur(time.Duration(win.writes.ValueAtQuantile(99))),
				mib(win.maxHeap), mib(win.maxRSS))
			winMu.Unlock()
		case <-ctx.Done():
			done = true
		case <-time.After(time.Until(end)):
			done = true
		}
	}
	ticker.Stop()
	wg.Wait()
	close(samplerDone)
	samplerWG.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}

	out, closeOut, err := reportWriter(cfg)
	if err != nil {
		return err
	}
	p := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	p("# rlmmbench soak")
	p("")
	p("- command: `rlmmbench %s` (go run ./cmd/rlmmbench …)", strings.Join(os.Args[1:], " "))
	p("- started %s, took %s; load average %s at the start, %s at the end", started.Format(time.RFC3339),
		time.Since(started).Round(time.Second), loadStart, loadAverage())
	p("- machine: %s", machine())
	p("- server: %s", srv.version)
	p("- %d segments in %d partitions; %d clients, one pool of %d connections; per call: 90%% lookups (two thirds hits, the rest misses in a gap, past the end, in another epoch), 10%% writes (an add, then the update that finishes it)",
		s.segments(), s.partitions, cfg.soakClients, cfg.soakClients)
	p("")
	p("| window | calls/s | p50 | p99 | p99.9 | lookups/s | lookup p50 | p99 | p99.9 | writes/s | write p50 | p99 | p99.9 | errors | peak heap | peak RSS | goroutines | database size |")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	secs := cfg.soakWindow.Seconds()
	for i, win := range windows {
		if i == nWindows-1 {
			secs = cfg.soakDuration.Seconds() - float64(nWindows-1)*cfg.soakWindow.Seconds()
		}
		q := func(h *hdrhistogram.Histogram, pct float64) string {
			return fmtDur(time.Duration(h.ValueAtQuantile(pct)))
		}
		errs := strconv.FormatInt(win.errors, 10)
		if win.errors > 0 {
			errs += fmt.Sprintf(" (%v)", win.firstErr)
		}
		p("| %d | %.0f | %s | %s | %s | %.0f | %s | %s | %s | %.0f | %s | %s | %s | %s | %.1f MiB | %.1f MiB | %d | %.0f MiB |", i+1,
			float64(win.all.TotalCount())/secs, q(win.all, 50), q(win.all, 99), q(win.all, 99.9),
			float64(win.lookups.TotalCount())/secs, q(win.lookups, 50), q(win.lookups, 99), q(win.lookups, 99.9),
			float64(win.writes.TotalCount())/secs, q(win.writes, 50), q(win.writes, 99), q(win.writes, 99.9),
			errs, mib(win.maxHeap), mib(win.maxRSS), win.goroutines, mib(uint64(win.dbBytes)))
	}
	first, last := windows[0], windows[nWindows-1]
	allRatio := float64(last.all.ValueAtQuantile(99)) / float64(first.all.ValueAtQuantile(99))
	lookupRatio := float64(last.lookups.ValueAtQuantile(99)) / float64(first.lookups.ValueAtQuantile(99))
	writeRatio := float64(last.writes.ValueAtQuantile(99)) / float64(first.writes.ValueAtQuantile(99))
	heapGrowth := mib(last.maxHeap) - mib(first.maxHeap)
	rssGrowth := mib(last.maxRSS) - mib(first.maxRSS)
	p("")
	p("| target | figure | result |")
	p("|---|---|---|")
	p("| p99 of all calls, last window ≤ 1.5 × the first | %s vs %s: %.2f | %s |", fmtDur(time.Duration(last.all.ValueAtQuantile(99))),
		fmtDur(time.Duration(first.all.ValueAtQuantile(99))), allRatio, mark(allRatio <= 1.5))
	p("| lookup p99, last window ≤ 1.5 × the first | %.2f | %s |", lookupRatio, mark(lookupRatio <= 1.5))
	p("| write p99, last window ≤ 1.5 × the first | %.2f | %s |", writeRatio, mark(writeRatio <= 1.5))
	p("| process memory flat: peak live heap, last window − first | %+.1f MiB | %s |", heapGrowth, mark(heapGrowth < 4))
	p("| process memory flat: peak RSS, last window − first | %+.1f MiB | %s |", rssGrowth, mark(rssGrowth < 8))
	var errs int64
	for _, win := range windows {
		errs += win.errors
	}
	p("| no errors | %d | %s |", errs, mark(errs == 0))
	return closeOut()
}

// residentBytes reads this process's resident set from /proc/self/statm.
func residentBytes() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}
