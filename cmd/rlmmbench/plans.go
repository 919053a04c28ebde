package main

// plans.go: the plan of every statement the measured operations send, with
// the buffers it touches, captured from the wire and explained with the same
// arguments.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	rs "github.com/krabka/remotestorage"
)

type planCheck struct {
	name    string
	buffers [2]int // custom plan, generic plan
	scans   [2]string
	err     error
}

// recorder keeps the last statement a connection sent.
type recorder struct {
	mu   sync.Mutex
	sql  string
	args []any
}

func (r *recorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.mu.Lock()
	r.sql, r.args = d.SQL, d.Args
	r.mu.Unlock()
	return ctx
}
func (r *recorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func checkPlans(ctx context.Context, admin *pgxpool.Pool, s shape) ([]planCheck, error) {
	cfg := admin.Config().Copy()
	rec := &recorder{}
	cfg.ConnConfig.Tracer = rec
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	m, err := rs.NewPgManager(ctx, pool)
	if err != nil {
		return nil, err
	}
	w := newWorkload(s, s.partitions)
	ops := mergeOps(mergeOps(opsByName(w.baselineOps(pool)), opsByName(w.readOps(m))), opsByName(w.listOps(m)))
	var out []planCheck
	for _, name := range []string{opBaseSelect, opLookupHit, opLookupGap, opLookupPast, opLookupEpoch, opHighest, opCaughtUp, opListByEpoch, opStream} {
		op := ops[name]
		rng := rand.New(rand.NewPCG(1, 2))
		if _, err := op.run(ctx, rng); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		rec.mu.Lock()
		sql, args := rec.sql, rec.args
		rec.mu.Unlock()
		pc := planCheck{name: name}
		for i, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			pc.buffers[i], pc.scans[i], pc.err = explain(ctx, admin, mode, sql, args)
			if pc.err != nil {
				break
			}
		}
		out = append(out, pc)
	}
	return out, nil
}

func mergeOps(a, b map[string]namedOp) map[string]namedOp {
	for k, v := range b {
		a[k] = v
	}
	return a
}

func explain(ctx context.Context, pool *pgxpool.Pool, mode, sql string, args []any) (int, string, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, "", err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
		return 0, "", err
	}
	defer conn.Exec(context.Background(), "RESET plan_cache_mode") //nolint:errcheck // best effort
	const name = "rlmmbench_explain"
	if _, err := conn.Conn().Prepare(ctx, name, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+sql); err != nil {
		return 0, "", err
	}
	defer conn.Conn().Deallocate(context.Background(), name) //nolint:errcheck // best effort
	var raw []byte
	if err := conn.QueryRow(ctx, name, args...).Scan(&raw); err != nil {
		return 0, "", err
	}
	var plans []struct {
		Plan map[string]any `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &plans); err != nil {
		return 0, "", err
	}
	top := plans[0].Plan
	buffers := int(num(top["Shared Hit Blocks"]) + num(top["Shared Read Blocks"]))
	var scans []string
	var walk func(node map[string]any)
	walk = func(node map[string]any) {
		typ, _ := node["Node Type"].(string)
		if strings.Contains(typ, "Scan") {
			desc := typ
			if idx, ok := node["Index Name"].(string); ok {
				desc += " " + idx
			} else if rel, ok := node["Relation Name"].(string); ok {
				desc += " " + rel
			}
			if hf, ok := node["Heap Fetches"]; ok {
				desc += fmt.Sprintf(" (heap fetches %d)", int(num(hf)))
			}
			scans = append(scans, desc)
		}
		children, _ := node["Plans"].([]any)
		for _, c := range children {
			walk(c.(map[string]any))
		}
	}
	walk(top)
	return buffers, strings.Join(scans, "; "), nil
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

// checkStreamPlan explains the second page of a stream over tp: at a large
// partition the page must come from an ordered index scan that stops after
// a page, not from reading the whole partition and sorting it.
func checkStreamPlan(ctx context.Context, admin *pgxpool.Pool, tp rs.TopicIDPartition) (planCheck, error) {
	cfg := admin.Config().Copy()
	rec := &recorder{}
	cfg.ConnConfig.Tracer = rec
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return planCheck{}, err
	}
	defer pool.Close()
	m, err := rs.NewPgManager(ctx, pool)
	if err != nil {
		return planCheck{}, err
	}
	n := 0
	for _, err := range m.RemoteLogSegments(ctx, tp) {
		if err != nil {
			return planCheck{}, err
		}
		if n++; n == 1500 { // into the second page
			break
		}
	}
	rec.mu.Lock()
	sql, args := rec.sql, rec.args
	rec.mu.Unlock()
	pc := planCheck{name: "RemoteLogSegments stream, second page of " + tp.Topic}
	for i, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		if pc.buffers[i], pc.scans[i], pc.err = explain(ctx, admin, mode, sql, args); pc.err != nil {
			break
		}
	}
	return pc, nil
}
