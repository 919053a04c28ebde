package main

// report.go: the Markdown report.

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

func writeReport(w io.Writer, r *results) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("# rlmmbench report")
	p("")
	p("- command: `rlmmbench %s` (go run ./cmd/rlmmbench …)", strings.Join(os.Args[1:], " "))
	p("- started %s, took %s; load average (1, 5, 15 min) %s at the start, %s at the end",
		r.started.Format(time.RFC3339), r.finished.Sub(r.started).Round(time.Second), r.loadAvg[0], r.loadAvg[1])
	p("- machine: %s", machine())
	where := "a throwaway local cluster (pgcluster), TCP on 127.0.0.1"
	if r.srv.local == nil {
		where = "DATABASE_URL"
	}
	p("- server: %s, via %s", r.srv.version, where)
	var settings []string
	for _, kv := range r.srv.settings {
		settings = append(settings, kv[0]+"="+kv[1])
	}
	p("- settings: %s", strings.Join(settings, ", "))
	p("- data: %d segments in %d partitions of %d (%d per topic), %d epochs per partition, a two-epoch segment at each epoch change, a gap of %d offsets after every segment; a second database of %d segments for the scale comparison",
		r.main.segments(), r.main.partitions, r.main.perPartition, r.main.partitionsPerTopic, r.main.lastEpoch()+1,
		stride-segmentLen, r.small.segments())
	p("- each figure: %s warm-up, then %s measured for the operation and as much for its baseline (InMemoryManager %s); one pool of exactly `clients` connections per client count",
		r.cfg.warmup, r.cfg.duration, r.cfg.memDuration)
	p("")
	p("Each operation is measured in %d slices alternating with its baseline (baseline, operation, operation, baseline, …) through the same pool, so that the rest of the machine weighs on both alike; the ratio is the operation's throughput ÷ its baseline's.", r.cfg.rounds)
	p("")
	p("Columns: stmts/op is statements sent per call (pgx tracer); CPU/op is this process's and the PostgreSQL server's CPU time per call; the backend profile samples pg_stat_activity every %s: `client` = idle waiting for the next request (round trip and client time), `cpu` = executing, `wal` = waiting for a WAL flush, `lock:object` = the commit lock NOTIFY takes (held through the WAL flush), `lock:tuple`/`lock:transactionid` = row lock waits, `lwlock` = internal locks, `io` = data file reads (OS cache or disk).", waitSampleInterval)

	section := func(title, key string, writes bool) {
		ms := r.sections[key]
		if len(ms) == 0 {
			return
		}
		p("")
		p("## %s", title)
		p("")
		header := "| operation | clients | ops/s | p50 | p99 | p99.9 | baseline | baseline ops/s | baseline p50 | baseline p99 | ratio | target | stmts/op | client CPU/op | server CPU/op | baseline server CPU/op |"
		rule := "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---:|"
		if writes {
			header += " WAL bytes/op |"
			rule += "---:|"
		} else {
			header += " rows/op |"
			rule += "---:|"
		}
		header += " backend profile |"
		rule += "---|"
		p("%s", header)
		p("%s", rule)
		for _, m := range ms {
			ratio, target, bName, bOps, b50, b99, bCPU := "", "", "", "", "", "", ""
			if b := m.paired; b != nil {
				ratio = fmt.Sprintf("%.2f", m.throughput()/b.throughput())
				if m.target > 0 {
					target = fmt.Sprintf("≥ %.1f %s", m.target, mark(m.throughput()/b.throughput() >= m.target))
				}
				bName, bOps, b50, b99 = b.name, fmt.Sprintf("%.0f", b.throughput()), fmtDur(b.quantile(50)), fmtDur(b.quantile(99))
				bCPU = cpuPerOp(b.probes.serverCPU, *b, b.probes.serverKnown)
			}
			row := fmt.Sprintf("| %s | %d | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |",
				m.name, m.clients, m.throughput(), fmtDur(m.quantile(50)), fmtDur(m.quantile(99)), fmtDur(m.quantile(99.9)),
				bName, bOps, b50, b99, ratio, target, stmtsPerOp(m),
				cpuPerOp(m.probes.clientCPU, m, true), cpuPerOp(m.probes.serverCPU, m, m.probes.serverKnown), bCPU)
			if writes {
				bytes := ""
				if m.probes.walKnown {
					bytes = fmt.Sprintf("%.0f", m.perOp(float64(m.probes.walBytes)))
				}
				row += fmt.Sprintf(" %s |", bytes)
			} else {
				row += fmt.Sprintf(" %.0f |", m.perOp(float64(m.rows)))
			}
			row += fmt.Sprintf(" %s |", m.probes.waits.shares())
			if m.errors > 0 || (m.paired != nil && m.paired.errors > 0) {
				row += fmt.Sprintf(" **errors: %s%s**", errorNote(m), pairedErrors(m))
			}
			p("%s", row)
		}
	}
	section("Reads and lists (closed loop)", "reads", false)
	section("Writes (closed loop)", "writes", true)

	if ms := r.sections["open-loop"]; len(ms) > 0 {
		p("")
		p("## Open loop: lookups at a fixed arrival rate")
		p("")
		p("Calls are scheduled at a fixed rate (a fraction of the closed-loop lookup throughput at the largest client count) from %d goroutines through a pool of %d connections; latency counts from the scheduled start, so queueing shows. The ratio column is the p99 ÷ the baseline's p99 at the same rate.", ms[0].clients, ms[0].clients/4)
		p("")
		p("| operation | offered/s | achieved/s | p50 | p99 | p99.9 | p99 ratio | server CPU/op | backend profile |")
		p("|---|---:|---:|---:|---:|---:|---:|---:|---|")
		for _, m := range ms {
			ratio := "baseline"
			if m.baseline != "" {
				for _, b := range ms {
					if b.name == m.baseline && b.rate == m.rate {
						ratio = fmt.Sprintf("%.2f", float64(m.quantile(99))/float64(b.quantile(99)))
					}
				}
			}
			p("| %s | %.0f | %.0f | %s | %s | %s | %s | %s | %s |", m.name, m.rate, m.throughput(),
				fmtDur(m.quantile(50)), fmtDur(m.quantile(99)), fmtDur(m.quantile(99.9)), ratio,
				cpuPerOp(m.probes.serverCPU, m, m.probes.serverKnown), m.probes.waits.shares())
		}
	}

	if ms := r.sections["scale"]; len(ms) > 0 {
		p("")
		p("## Scale: lookup latency against the number of segments")
		p("")
		p("The same lookup (hits, uniformly random partitions and offsets) on the loaded database and on a database of %d segments, in alternating slices; the ratios are loaded ÷ small.", r.small.segments())
		p("")
		p("| clients | segments | ops/s | p50 | p99 | p99.9 | p50 ratio | p99 ratio | server CPU/op |")
		p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, m := range ms {
			b := m.paired
			p("| %d | %d | %.0f | %s | %s | %s | | | %s |", m.clients, r.small.segments(), b.throughput(),
				fmtDur(b.quantile(50)), fmtDur(b.quantile(99)), fmtDur(b.quantile(99.9)), cpuPerOp(b.probes.serverCPU, *b, b.probes.serverKnown))
			p("| %d | %d | %.0f | %s | %s | %s | %.2f | %.2f | %s |", m.clients, r.main.segments(), m.throughput(),
				fmtDur(m.quantile(50)), fmtDur(m.quantile(99)), fmtDur(m.quantile(99.9)),
				float64(m.quantile(50))/float64(b.quantile(50)), float64(m.quantile(99))/float64(b.quantile(99)),
				cpuPerOp(m.probes.serverCPU, m, m.probes.serverKnown))
		}
	}

	if ms := r.sections["memory"]; len(ms) > 0 {
		p("")
		p("## InMemoryManager: what durability costs")
		p("")
		p("The same operations on `InMemoryManager` holding %d segments (its cost per call depends on the partition's size, not the total). The last column is PgManager's throughput ÷ InMemoryManager's.", min(r.cfg.memPartition, r.main.partitions)*r.main.perPartition)
		p("")
		p("| operation | clients | ops/s | p50 | p99 | p99.9 | client CPU/op | PgManager ÷ memory |")
		p("|---|---:|---:|---:|---:|---:|---:|---:|")
		for _, m := range ms {
			ratio := ""
			for _, key := range []string{"reads", "writes"} {
				for _, pg := range r.sections[key] {
					if pg.name == m.name && pg.clients == m.clients {
						ratio = fmt.Sprintf("%.2f", pg.throughput()/m.throughput())
					}
				}
			}
			p("| %s | %d | %.0f | %s | %s | %s | %s | %s |", m.name, m.clients, m.throughput(),
				fmtDur(m.quantile(50)), fmtDur(m.quantile(99)), fmtDur(m.quantile(99.9)), cpuPerOp(m.probes.clientCPU, m, true), ratio)
		}
	}

	if len(r.walks) > 0 {
		p("")
		p("## Peak memory walking one partition: slice list vs stream")
		p("")
		p("Each walk in a fresh process; `idle` only connects. Sampled every millisecond (runtime/metrics): peak live heap is what the garbage collector last found reachable (with a collection at the end of the walk, its result still held); heap objects adds the dead objects not yet swept, so it follows the collector's pacing (GOGC) more than what the walk keeps. Max RSS is the kernel's high-water mark (VmHWM).")
		p("")
		p("| partition size | walk | segments | peak live heap | peak heap objects | max RSS | allocated | time |")
		p("|---:|---|---:|---:|---:|---:|---:|---:|")
		for _, wr := range r.walks {
			p("| %d | %s | %d | %.1f MiB | %.1f MiB | %.1f MiB | %.1f MiB | %.2fs |", wr.Size, wr.Mode, wr.Segments,
				mib(wr.PeakLive), mib(wr.PeakHeap), mib(uint64(wr.MaxRSS)), mib(wr.TotalHeap), wr.Seconds)
		}
	}

	if len(r.plans) > 0 {
		p("")
		p("## Plans at %d segments", r.main.segments())
		p("")
		p("The statement each operation sent, explained with the same arguments (EXPLAIN ANALYZE, BUFFERS) under a custom and a generic plan.")
		p("")
		p("| operation | buffers custom/generic | scans (generic plan) |")
		p("|---|---:|---|")
		for _, pc := range r.plans {
			if pc.err != nil {
				p("| %s | | error: %v |", pc.name, pc.err)
				continue
			}
			p("| %s | %d / %d | %s |", pc.name, pc.buffers[0], pc.buffers[1], pc.scans[1])
		}
	}

	writeTargets(p, r)
}

func mark(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

func pairedErrors(m measurement) string {
	if m.paired == nil {
		return ""
	}
	return errorNote(*m.paired)
}

func stmtsPerOp(m measurement) string {
	if m.probes.queries == 0 && m.probes.prepares == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f", m.perOp(float64(m.probes.queries+m.probes.prepares)))
}

func cpuPerOp(d time.Duration, m measurement, known bool) string {
	if !known || m.ops == 0 {
		return ""
	}
	return fmtDur(time.Duration(m.perOp(float64(d))))
}

// writeTargets sums up the targets.
func writeTargets(p func(string, ...any), r *results) {
	p("")
	p("## Targets")
	p("")
	p("| target | figure | result |")
	p("|---|---|---|")
	for _, key := range []string{"reads", "writes"} {
		for _, m := range r.sections[key] {
			if m.target == 0 || m.paired == nil {
				continue
			}
			ratio := m.throughput() / m.paired.throughput()
			p("| %s ≥ %.1f × %s, %d clients | %.2f | %s |", m.name, m.target, m.baseline, m.clients, ratio, mark(ratio >= m.target))
		}
	}
	for _, m := range r.sections["scale"] {
		b := m.paired
		ratio := float64(m.quantile(99)) / float64(b.quantile(99))
		p("| lookup p99 at %d segments ≤ 1.5 × p99 at %d, %d clients | %s vs %s: %.2f | %s |",
			r.main.segments(), r.small.segments(), m.clients, fmtDur(m.quantile(99)), fmtDur(b.quantile(99)), ratio, mark(ratio <= 1.5))
	}
	var smallest, largest *walkResult
	for i := range r.walks {
		wr := &r.walks[i]
		if wr.Mode != "stream" {
			continue
		}
		if smallest == nil || wr.Size < smallest.Size {
			smallest = wr
		}
		if largest == nil || wr.Size > largest.Size {
			largest = wr
		}
	}
	if smallest != nil && largest != smallest {
		growth := mib(largest.PeakLive) - mib(smallest.PeakLive)
		p("| stream memory flat in the partition size (peak live heap grows < 2 MiB from %d to %d segments) | %.1f → %.1f MiB | %s |",
			smallest.Size, largest.Size, mib(smallest.PeakLive), mib(largest.PeakLive), mark(growth < 2))
	}
}
