package main

// run.go: driving an operation closed-loop (n clients, each issuing the
// next call when the last returns) or open-loop (calls scheduled at a fixed
// rate, latency counted from the scheduled start), and the probes that say
// what bounded it.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// opFunc runs one operation. It returns the rows it read (lists) and an
// error when the call failed or answered wrongly.
type opFunc func(ctx context.Context, rng *rand.Rand) (rows int, err error)

// measurement is what one run of one operation produced.
type measurement struct {
	name     string
	opName   string // name without decoration (scale runs)
	baseline string
	target   float64
	clients  int
	rate     float64 // open loop: the arrival rate; 0 for a closed loop
	ops      int64
	rows     int64
	errors   int64
	firstErr error
	elapsed  time.Duration
	hist     *hdrhistogram.Histogram // nanoseconds
	probes   probeDelta
	// paired is the baseline measured in slices alternating with this
	// operation's (see pairedLoop); nil when measured alone.
	paired *measurement
}

func newHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(1_000, 60_000_000_000, 3) // 1 µs .. 60 s, 3 digits
}

func (m measurement) throughput() float64 { return float64(m.ops) / m.elapsed.Seconds() }

// quantile returns the latency at q (0-100).
func (m measurement) quantile(q float64) time.Duration {
	return time.Duration(m.hist.ValueAtQuantile(q))
}

// perOp divides a count by the operations.
func (m measurement) perOp(v float64) float64 {
	if m.ops == 0 {
		return 0
	}
	return v / float64(m.ops)
}

// runSpec says how long to warm up and measure.
type runSpec struct {
	warmup   time.Duration
	duration time.Duration
	// settle waits before and after the measured window so that the
	// server's cumulative statistics (pg_stat_wal) are flushed by then.
	settle bool
}

// closedLoop runs op from clients goroutines for spec.duration after a
// warm-up, and returns the merged histogram and the probe deltas.
func closedLoop(ctx context.Context, name string, clients int, spec runSpec, op opFunc, p *probes) measurement {
	if spec.warmup > 0 {
		runClients(ctx, clients, spec.warmup, op, false)
	}
	if spec.settle {
		time.Sleep(settleTime)
	}
	before := p.snapshot(ctx)
	sampler := p.startWaitSampler(ctx)
	m := runClients(ctx, clients, spec.duration, op, true)
	m.probes.waits = sampler.stop()
	if spec.settle {
		time.Sleep(settleTime)
	}
	m.probes = p.snapshot(ctx).sub(before, m.probes.waits)
	m.name, m.clients = name, clients
	logf("  %-40s c=%-3d %9.0f ops/s  p50 %-8s p99 %-8s p99.9 %-8s%s", name, clients, m.throughput(),
		fmtDur(m.quantile(50)), fmtDur(m.quantile(99)), fmtDur(m.quantile(99.9)), errorNote(m))
	return m
}

// pairedLoop measures op and its baseline in alternating slices (rounds of
// base, op, then op, base, …), so that whatever else the machine does
// weighs on both alike; the ratio of the two is what the report states.
func pairedLoop(ctx context.Context, op, base namedOp, clients int, spec runSpec, rounds int, p *probes) measurement {
	if spec.warmup > 0 {
		runClients(ctx, clients, spec.warmup/2, base.run, false)
		runClients(ctx, clients, spec.warmup/2, op.run, false)
	}
	slice := spec.duration / time.Duration(rounds)
	opM := measurement{name: op.name, clients: clients, hist: newHistogram(), probes: probeDelta{waits: waitProfile{}}}
	baseM := measurement{name: base.name, clients: clients, hist: newHistogram(), probes: probeDelta{waits: waitProfile{}}}
	for r := range rounds {
		order := []struct {
			run opFunc
			m   *measurement
		}{{base.run, &baseM}, {op.run, &opM}}
		if r%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, side := range order {
			before := p.snapshot(ctx)
			sampler := p.startWaitSampler(ctx)
			m := runClients(ctx, clients, slice, side.run, true)
			waits := sampler.stop()
			side.m.accumulate(m, p.snapshot(ctx).sub(before, waits))
		}
	}
	opM.paired = &baseM
	logf("  %-52s c=%-3d %9.0f ops/s  p50 %-8s p99 %-8s | baseline %9.0f ops/s  p50 %-8s p99 %-8s | ratio %.2f%s",
		op.name, clients, opM.throughput(), fmtDur(opM.quantile(50)), fmtDur(opM.quantile(99)),
		baseM.throughput(), fmtDur(baseM.quantile(50)), fmtDur(baseM.quantile(99)),
		opM.throughput()/baseM.throughput(), errorNote(opM)+errorNote(baseM))
	return opM
}

// accumulate adds a slice to a measurement.
func (m *measurement) accumulate(slice measurement, d probeDelta) {
	m.hist.Merge(slice.hist)
	m.ops += slice.ops
	m.rows += slice.rows
	m.errors += slice.errors
	if m.firstErr == nil {
		m.firstErr = slice.firstErr
	}
	m.elapsed += slice.elapsed
	m.probes.queries += d.queries
	m.probes.prepares += d.prepares
	m.probes.clientCPU += d.clientCPU
	m.probes.serverCPU += d.serverCPU
	m.probes.serverKnown = d.serverKnown
	m.probes.walBytes += d.walBytes
	m.probes.walKnown = d.walKnown
	for k, v := range d.waits {
		m.probes.waits[k] += v
	}
}

// settleTime is longer than PostgreSQL's 1 s minimum interval between a
// backend's statistics flushes.
const settleTime = 1200 * time.Millisecond

func errorNote(m measurement) string {
	if m.errors == 0 {
		return ""
	}
	return fmt.Sprintf("  %d ERRORS, first: %v", m.errors, m.firstErr)
}

func runClients(ctx context.Context, clients int, d time.Duration, op opFunc, record bool) measurement {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		total    = measurement{hist: newHistogram()}
		deadline = time.Now().Add(d)
		start    = time.Now()
	)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), uint64(time.Now().UnixNano())))
			h := newHistogram()
			var ops, rows, errs int64
			var firstErr error
			for ctx.Err() == nil {
				t0 := time.Now()
				if !t0.Before(deadline) {
					break
				}
				n, err := op(ctx, rng)
				_ = h.RecordValue(int64(time.Since(t0)))
				ops++
				rows += int64(n)
				if err != nil {
					if errs == 0 {
						firstErr = err
					}
					errs++
				}
			}
			mu.Lock()
			defer mu.Unlock()
			total.hist.Merge(h)
			total.ops += ops
			total.rows += rows
			total.errors += errs
			if total.firstErr == nil {
				total.firstErr = firstErr
			}
		}()
	}
	wg.Wait()
	total.elapsed = time.Since(start)
	return total
}

// openLoop schedules calls of op at rate per second for d and measures each
// from its scheduled start, so that time spent queued behind slow calls is
// counted (no coordinated omission). goroutines bounds the calls in flight;
// the pool behind op bounds the concurrency the database sees.
func openLoop(ctx context.Context, name string, rate float64, d time.Duration, goroutines int, op opFunc, p *probes) measurement {
	interval := time.Duration(float64(time.Second) / rate)
	total := int64(d / interval)
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		mu   sync.Mutex
		m    = measurement{hist: newHistogram()}
	)
	before := p.snapshot(ctx)
	sampler := p.startWaitSampler(ctx)
	start := time.Now()
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), uint64(time.Now().UnixNano())))
			h := newHistogram()
			var ops, errs int64
			var firstErr error
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= total {
					break
				}
				intended := start.Add(time.Duration(i) * interval)
				if wait := time.Until(intended); wait > 0 {
					time.Sleep(wait)
				}
				_, err := op(ctx, rng)
				_ = h.RecordValue(int64(time.Since(intended)))
				ops++
				if err != nil {
					if errs == 0 {
						firstErr = err
					}
					errs++
				}
			}
			mu.Lock()
			defer mu.Unlock()
			m.hist.Merge(h)
			m.ops += ops
			m.errors += errs
			if m.firstErr == nil {
				m.firstErr = firstErr
			}
		}()
	}
	wg.Wait()
	m.elapsed = time.Since(start)
	waits := sampler.stop()
	m.probes = p.snapshot(ctx).sub(before, waits)
	m.name, m.clients, m.rate = name, goroutines, rate
	logf("  %-40s %6.0f/s  achieved %7.0f/s  p50 %-8s p99 %-8s p99.9 %-8s%s", name, rate, m.throughput(),
		fmtDur(m.quantile(50)), fmtDur(m.quantile(99)), fmtDur(m.quantile(99.9)), errorNote(m))
	return m
}

func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/1e6)
	}
	return d.Round(10 * time.Millisecond).String()
}
