package main

// bench.go: the phases of a benchmark run.

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	rs "github.com/krabka/remotestorage"
)

// results is everything a run measured, by section.
type results struct {
	cfg      config
	srv      *server
	started  time.Time
	finished time.Time
	loadAvg  [2]string // at the start and at the end
	main     shape
	small    shape
	sections map[string][]measurement
	walks    []walkResult
	plans    []planCheck
}

func (r *results) add(section string, m measurement, op namedOp) {
	m.baseline, m.target = op.baseline, op.target
	r.sections[section] = append(r.sections[section], m)
}

func runBench(ctx context.Context, cfg config, srv *server) error {
	r := &results{cfg: cfg, srv: srv, started: time.Now(), sections: map[string][]measurement{}}
	r.loadAvg[0] = loadAverage()
	r.main = newShape("bench", cfg.segments, cfg.perPartition)
	r.small = newShape("small", cfg.small, cfg.perPartition)
	logf("machine: %s; load average %s", machine(), r.loadAvg[0])
	logf("server: %s", srv.version)

	mainDB, drop, err := prepareDatabase(ctx, cfg, srv, fmt.Sprintf("rlmmbench_%d", r.main.segments()), r.main)
	if drop != nil {
		defer drop()
	}
	if err != nil {
		return err
	}
	admin, err := openAdmin(ctx, mainDB.dsn)
	if err != nil {
		return err
	}
	defer admin.Close()
	if err := checkBaselineColumns(ctx, admin); err != nil {
		return err
	}
	if r.plans, err = checkPlans(ctx, admin, r.main); err != nil {
		return err
	}
	w := newWorkload(r.main, r.main.partitions)
	spec := runSpec{warmup: cfg.warmup, duration: cfg.duration}
	probesFor := func(counter *statementCounter, db database) *probes {
		return &probes{counter: counter, admin: admin, dbName: db.name, serverPID: srv.serverPID}
	}

	covering := false
	if !cfg.skip["reads"] && !cfg.skip["proposals"] {
		if err := createCoveringLookup(ctx, admin); err != nil {
			return err
		}
		covering = true
	}

	// Reads and lists, each concurrency with its own pool; each operation
	// measured in slices alternating with its baseline's.
	if !cfg.skip["reads"] || !cfg.skip["lists"] {
		for _, c := range cfg.clients {
			logf("reads and lists at %d clients", c)
			err := withManager(ctx, mainDB.dsn, c, func(pool *pgxpool.Pool, counter *statementCounter, m *rs.PgManager) {
				p := probesFor(counter, mainDB)
				base := opsByName(w.baselineOps(pool))
				var ops []namedOp
				if !cfg.skip["reads"] {
					ops = append(ops, w.readOps(m)...)
				}
				if covering {
					ops = append(ops, w.coveringLookupOp(pool))
				}
				if !cfg.skip["lists"] {
					ops = append(ops, w.listOps(m)...)
				}
				for _, op := range ops {
					r.add("reads", pairedLoop(ctx, op, base[op.baseline], c, spec, cfg.rounds, p), op)
				}
			})
			if err != nil {
				return err
			}
		}
	}

	// Open loop: lookups and the PK SELECT at the same fixed arrival rates.
	if !cfg.skip["open-loop"] && !cfg.skip["reads"] {
		c := slices.Max(cfg.clients)
		var closed float64
		for _, m := range r.sections["reads"] {
			if m.name == opLookupHit && m.clients == c {
				closed = m.throughput()
			}
		}
		logf("open loop through a pool of %d connections", c)
		err := withManager(ctx, mainDB.dsn, c, func(pool *pgxpool.Pool, counter *statementCounter, m *rs.PgManager) {
			p := probesFor(counter, mainDB)
			base := opsByName(w.baselineOps(pool))
			lookup := opsByName(w.readOps(m))[opLookupHit]
			for _, f := range cfg.openLoopAt {
				rate := f * closed
				for _, op := range []namedOp{base[opBaseSelect], lookup} {
					r.add("open-loop", openLoop(ctx, op.name, rate, cfg.openLoopDur, 4*c, op.run, p), op)
				}
			}
		})
		if err != nil {
			return err
		}
	}

	// Scale: the lookup at 10k segments next to the loaded size, back to back.
	if !cfg.skip["scale"] {
		smallDB, dropSmall, err := prepareDatabase(ctx, cfg, srv, fmt.Sprintf("rlmmbench_%d", r.small.segments()), r.small)
		if dropSmall != nil {
			defer dropSmall()
		}
		if err != nil {
			return err
		}
		smallW := newWorkload(r.small, r.small.partitions)
		// The lookup on the loaded database alternates with the lookup on
		// the small one: the same operation, the database's size the only
		// difference.
		for _, c := range []int{1, 8} {
			logf("scale at %d clients", c)
			err := withManager(ctx, smallDB.dsn, c, func(_ *pgxpool.Pool, _ *statementCounter, small *rs.PgManager) {
				err := withManager(ctx, mainDB.dsn, c, func(_ *pgxpool.Pool, counter *statementCounter, big *rs.PgManager) {
					op := opsByName(w.readOps(big))[opLookupHit]
					op.name = fmt.Sprintf("%s @ %d segments", opLookupHit, r.main.segments())
					base := opsByName(smallW.readOps(small))[opLookupHit]
					base.name = fmt.Sprintf("%s @ %d segments", opLookupHit, r.small.segments())
					op.baseline = base.name
					pm := pairedLoop(ctx, op, base, c, spec, cfg.rounds, probesFor(counter, mainDB))
					pm.opName = opLookupHit
					r.add("scale", pm, op)
				})
				if err != nil {
					logf("scale: %v", err)
				}
			})
			if err != nil {
				return err
			}
		}
	}

	// Writes, each alternating with the raw single-row UPDATE commit; then
	// the alternatives that show what the NOTIFY of every write costs.
	if !cfg.skip["writes"] {
		for _, c := range cfg.clients {
			logf("writes at %d clients", c)
			n, err := startNotifier(ctx, mainDB.dsn)
			if err != nil {
				return err
			}
			w.notifier = n
			// What durability costs: the same UPDATE with the commit not
			// waiting for its WAL flush. Measured, never used by the library.
			asyncPool, _, err := openPool(ctx, withParam(mainDB.dsn, "synchronous_commit", "off"), c)
			if err != nil {
				asyncPool = nil
			}
			err = withManager(ctx, mainDB.dsn, c, func(pool *pgxpool.Pool, counter *statementCounter, m *rs.PgManager) {
				p := probesFor(counter, mainDB)
				base := opsByName(w.baselineOps(pool))
				ops := []namedOp{w.addOp(m), w.updateOp(m), base[opBaseUpdateNotify], base[opBaseUpdateThenNotify], base[opBaseUpdateBatched]}
				if asyncPool != nil {
					async := opsByName(w.baselineOps(asyncPool))[opBaseUpdate]
					ops = append(ops, namedOp{name: opBaseUpdateAsync, baseline: opBaseUpdate, run: async.run})
				}
				for _, op := range ops {
					r.add("writes", pairedLoop(ctx, op, base[op.baseline], c, spec, cfg.rounds, p), op)
				}
			})
			n.stop()
			w.notifier = nil
			if asyncPool != nil {
				asyncPool.Close()
			}
			if err != nil {
				return err
			}
		}
	}

	// The same operations on InMemoryManager.
	if !cfg.skip["memory"] {
		parts := min(cfg.memPartition, r.main.partitions)
		logf("loading %d segments into InMemoryManager", parts*r.main.perPartition)
		mem := rs.NewInMemoryManager()
		if err := loadMemory(ctx, mem, r.main, parts); err != nil {
			return err
		}
		memW := newWorkload(r.main, parts)
		memSpec := runSpec{warmup: cfg.warmup / 2, duration: cfg.memDuration}
		p := &probes{}
		// Reads for every client count first, then writes, as on PostgreSQL:
		// the adds would otherwise grow the partitions the reads measure.
		for _, writes := range []bool{false, true} {
			for _, c := range cfg.clients {
				logf("InMemoryManager at %d clients (writes: %v)", c, writes)
				ops := append(memW.readOps(mem), memW.listOps(mem)...)
				if writes {
					ops = []namedOp{memW.addOp(mem), memW.updateOp(mem)}
				}
				for _, op := range ops {
					r.add("memory", closedLoop(ctx, op.name, c, memSpec, op.run, p), op)
				}
			}
		}
	}

	if !cfg.skip["walk"] && len(cfg.walkSizes) > 0 {
		walks, plans, err := runWalks(ctx, cfg, srv)
		if err != nil {
			return err
		}
		r.walks = walks
		r.plans = append(r.plans, plans...)
	}

	r.finished = time.Now()
	r.loadAvg[1] = loadAverage()
	out, closeOut, err := reportWriter(cfg)
	if err != nil {
		return err
	}
	writeReport(out, r)
	return closeOut()
}

func opsByName(ops []namedOp) map[string]namedOp {
	m := make(map[string]namedOp, len(ops))
	for _, op := range ops {
		m[op.name] = op
	}
	return m
}

// withManager opens a pool of c connections on dsn and a PgManager over it.
func withManager(ctx context.Context, dsn string, c int, f func(*pgxpool.Pool, *statementCounter, *rs.PgManager)) error {
	pool, counter, err := openPool(ctx, dsn, c)
	if err != nil {
		return err
	}
	defer pool.Close()
	m, err := rs.NewPgManager(ctx, pool)
	if err != nil {
		return err
	}
	defer m.Close()
	f(pool, counter, m)
	return ctx.Err()
}

// withParam adds a query parameter (pgx passes unknown ones to the server as
// run-time settings) to a URL DSN.
func withParam(dsn, key, value string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}
