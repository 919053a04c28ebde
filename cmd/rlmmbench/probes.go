package main

// probes.go: what bounded a measurement. Statements per operation (pgx's
// tracer), CPU of this process and of the PostgreSQL server, WAL flushes
// (pg_stat_wal), and a sampling of what the server's backends were doing
// (pg_stat_activity wait events: on CPU, waiting for WAL, for a lock, or
// idle waiting for the client's next request).

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// appName marks the connections whose work is measured, so the wait sampler
// sees only them.
const appName = "rlmmbench"

// statementCounter counts what a pool sends: each query, batch, prepare or
// copy is at least one round trip.
type statementCounter struct {
	queries  atomic.Int64
	prepares atomic.Int64
}

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.queries.Add(1)
	return ctx
}
func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *statementCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.queries.Add(1)
	return ctx
}
func (c *statementCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *statementCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}
func (c *statementCounter) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	c.prepares.Add(1)
	return ctx
}
func (c *statementCounter) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}

// probes takes snapshots; a nil admin pool (the in-memory runs) measures the
// client only.
type probes struct {
	counter   *statementCounter
	admin     *pgxpool.Pool
	dbName    string
	serverPID int // postmaster; 0: unknown (not a local cluster)
}

type probeSnapshot struct {
	queries, prepares int64
	clientCPU         time.Duration
	serverCPU         time.Duration
	serverKnown       bool
	walLSN, walSyncs  int64
	walKnown          bool
}

// probeDelta is the difference of two snapshots, plus the wait profile.
type probeDelta struct {
	queries, prepares int64
	clientCPU         time.Duration
	serverCPU         time.Duration
	serverKnown       bool
	walBytes          int64
	walSyncs          int64
	walKnown          bool
	waits             waitProfile
}

func (p *probes) snapshot(ctx context.Context) probeSnapshot {
	var s probeSnapshot
	if p.counter != nil {
		s.queries, s.prepares = p.counter.queries.Load(), p.counter.prepares.Load()
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.clientCPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if p.serverPID > 0 {
		s.serverCPU, s.serverKnown = processTreeCPU(p.serverPID)
	}
	if p.admin != nil {
		err := p.admin.QueryRow(ctx, `SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint, wal_sync FROM pg_stat_wal`).
			Scan(&s.walLSN, &s.walSyncs)
		s.walKnown = err == nil
	}
	return s
}

func (s probeSnapshot) sub(before probeSnapshot, waits waitProfile) probeDelta {
	return probeDelta{
		queries:     s.queries - before.queries,
		prepares:    s.prepares - before.prepares,
		clientCPU:   s.clientCPU - before.clientCPU,
		serverCPU:   s.serverCPU - before.serverCPU,
		serverKnown: s.serverKnown && before.serverKnown,
		walBytes:    s.walLSN - before.walLSN,
		walSyncs:    s.walSyncs - before.walSyncs,
		walKnown:    s.walKnown && before.walKnown,
		waits:       waits,
	}
}

// processTreeCPU sums user+system CPU of pid and its children from /proc:
// the postmaster, its backends and its background processes.
func processTreeCPU(pid int) (time.Duration, bool) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	var ticks int64
	found := false
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The command may hold spaces: fields start after the last ')'.
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(fields) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		if n != pid && ppid != pid {
			continue
		}
		utime, _ := strconv.ParseInt(fields[11], 10, 64)
		stime, _ := strconv.ParseInt(fields[12], 10, 64)
		ticks += utime + stime
		found = found || n == pid
	}
	return time.Duration(ticks) * (time.Second / 100), found // USER_HZ is 100 on Linux
}

// postmasterPID reads the first line of the data directory's postmaster.pid.
func postmasterPID(dataDir string) int {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	return pid
}

// localPostmasterPID finds the postmaster of a server on this host: the
// parent of its checkpointer, when /proc shows that process. 0 otherwise.
func localPostmasterPID(ctx context.Context, conn *pgx.Conn) int {
	var pid int
	if err := conn.QueryRow(ctx, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'").Scan(&pid); err != nil {
		return 0
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	s := string(b)
	if !strings.Contains(s, "(postgres)") {
		return 0
	}
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

// waitProfile counts backend samples per class: "cpu" (running), "client"
// (idle, waiting for the next request: the round trip and the client's own
// time), "wal" (waiting for a WAL write or flush, its own or another's),
// "lock" (a heavyweight lock: row or tuple), "lwlock", "io", and others by
// wait event type.
type waitProfile map[string]int

var waitSampleInterval = 10 * time.Millisecond

type waitSampler struct {
	stopOnce sync.Once
	done     chan struct{}
	result   chan waitProfile
}

func (p *probes) startWaitSampler(ctx context.Context) *waitSampler {
	w := &waitSampler{done: make(chan struct{}), result: make(chan waitProfile, 1)}
	if p.admin == nil {
		w.result <- nil
		return w
	}
	go func() {
		profile := waitProfile{}
		tick := time.NewTicker(waitSampleInterval)
		defer tick.Stop()
		for {
			select {
			case <-w.done:
				w.result <- profile
				return
			case <-ctx.Done():
				w.result <- profile
				return
			case <-tick.C:
			}
			rows, err := p.admin.Query(ctx, `
SELECT coalesce(state, ''), coalesce(wait_event_type, ''), coalesce(wait_event, '')
FROM pg_stat_activity
WHERE datname = $1 AND application_name = $2 AND pid <> pg_backend_pid()`, p.dbName, appName)
			if err != nil {
				continue
			}
			for rows.Next() {
				var state, typ, event string
				if rows.Scan(&state, &typ, &event) == nil {
					profile[waitClass(state, typ, event)]++
				}
			}
			rows.Close()
		}
	}()
	return w
}

func (w *waitSampler) stop() waitProfile {
	w.stopOnce.Do(func() { close(w.done) })
	return <-w.result
}

func waitClass(state, typ, event string) string {
	switch {
	case state != "active" || (typ == "Client" && event == "ClientRead"):
		return "client"
	case typ == "":
		return "cpu"
	case strings.HasPrefix(event, "WAL"):
		return "wal"
	case typ == "Lock":
		return "lock:" + event // tuple, transactionid, object (NOTIFY's commit lock), …
	case typ == "LWLock":
		return "lwlock"
	case typ == "IO":
		return "io"
	}
	return strings.ToLower(typ)
}

// shares renders the profile as percentages, largest first.
func (w waitProfile) shares() string {
	total := 0
	for _, n := range w {
		total += n
	}
	if total == 0 {
		return ""
	}
	type kv struct {
		k string
		n int
	}
	var list []kv
	for k, n := range w {
		list = append(list, kv{k, n})
	}
	for i := range list {
		for j := i + 1; j < len(list); j++ {
			if list[j].n > list[i].n || (list[j].n == list[i].n && list[j].k < list[i].k) {
				list[i], list[j] = list[j], list[i]
			}
		}
	}
	var parts []string
	for _, e := range list {
		pct := 100 * float64(e.n) / float64(total)
		if pct < 1 {
			continue
		}
		parts = append(parts, e.k+" "+strconv.Itoa(int(pct+0.5))+"%")
	}
	return strings.Join(parts, ", ")
}
