// Package plancheck is the plan tests' instrument: it explains a statement
// as PostgreSQL runs it and says how many buffers it touched, so that a test
// can check that the cost does not grow with the data, whatever the planner
// knows of it. The library's plan test (pgmanager_plan_test.go at the module root) and
// rlmmctl's (cmd/rlmmctl) use it.
//
// A plan test measures each statement under every statistics State, at two
// sizes of the data, with custom and generic plans (PlanCacheModes), and
// compares the large size with the small one (Allowed).
package plancheck

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// State is what the planner knows of the data when a statement runs.
// Autovacuum must be off for the tables, so that the state is the one named.
type State int

const (
	// NeverAnalyzed: the rows were written and nothing has run ANALYZE
	// (every new cluster, every new partition, before autovacuum).
	NeverAnalyzed State = iota
	// AnalyzedSmallGrown: ANALYZE ran at the small size, then the tables
	// grew (statistics that describe a database long gone).
	AnalyzedSmallGrown
	// Analyzed: ANALYZE ran after the writes.
	Analyzed
	// Vacuumed: VACUUM ANALYZE ran after the writes, as autovacuum leaves
	// a table: the visibility map set as well, which makes heap reads
	// cheaper to the planner and can turn an ordered index walk into a
	// bitmap scan and a sort.
	Vacuumed
)

// States lists every State, in the order above.
var States = []State{NeverAnalyzed, AnalyzedSmallGrown, Analyzed, Vacuumed}

func (s State) String() string {
	return [...]string{"never analyzed", "analyzed small, grown 100x", "analyzed", "vacuumed"}[s]
}

// PlanCacheModes are the plan_cache_mode settings a statement is explained
// under: the plan made for its arguments, and the generic plan that a
// prepared statement may switch to after five executions.
var PlanCacheModes = []string{"force_custom_plan", "force_generic_plan"}

// Cost is what one explained execution touched.
type Cost struct {
	// Buffers is the shared buffers the whole statement hit or read.
	Buffers int
	// Rows is the rows the statement returned.
	Rows int
	// Walked is the number of index probes a statement makes by design
	// (a walk of k lookups is k probes); the caller sets it.
	Walked int
	// Plan is EXPLAIN's JSON.
	Plan string
}

// Allowed is the most buffers the large measurement may touch, given the
// small one: O(log n + rows), a B-tree one level deeper per index touched,
// at most a few buffers per row returned beyond what the small size needed
// per row, and a walk of k lookups k probes, each a level deeper.
func Allowed(small, large Cost) int {
	return small.Buffers + 12 + 3*max(0, large.Rows-small.Rows) + 3*large.Walked
}

// Explain explains sql with args as a prepared statement under
// planCacheMode (so that force_generic_plan explains the generic plan),
// inside a transaction that is rolled back, so that an explained write
// changes nothing, and returns the buffers it touched and the rows it
// returned.
func Explain(t testing.TB, conn *pgx.Conn, planCacheMode, sql string, args []any) Cost {
	t.Helper()
	ctx := t.Context()
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(context.Background()) //nolint:errcheck // explained writes are undone
	_, err = tx.Exec(ctx, "SET LOCAL plan_cache_mode = "+planCacheMode)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "PREPARE rlmm_explained AS "+sql)
	require.NoError(t, err, firstLine(sql))
	execute := "EXECUTE rlmm_explained"
	if len(args) > 0 {
		placeholders := make([]string, len(args))
		for i := range args {
			placeholders[i] = fmt.Sprintf("$%d", i+1)
		}
		execute += "(" + strings.Join(placeholders, ", ") + ")"
	}
	var raw []byte
	// EXECUTE takes no protocol-level parameters: pgx quotes the arguments
	// into the text (simple protocol).
	err = tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+execute,
		append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...).Scan(&raw)
	require.NoError(t, err, firstLine(sql))
	_, err = tx.Exec(ctx, "DEALLOCATE rlmm_explained")
	require.NoError(t, err)
	var plans []struct {
		Plan map[string]any `json:"Plan"`
	}
	require.NoError(t, json.Unmarshal(raw, &plans))
	top := plans[0].Plan
	return Cost{
		Buffers: int(top["Shared Hit Blocks"].(float64) + top["Shared Read Blocks"].(float64)),
		Rows:    int(top["Actual Rows"].(float64)),
		Plan:    string(raw),
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// Load writes the data of a measurement at scale and leaves the planner in
// state: autovacuum off for the tables of the store, so that nothing
// analyzes them behind the test's back, then load(from, to), which writes
// the data of scales (from, to], with ANALYZE where state says.
func Load(t testing.TB, q Querier, state State, scale int, load func(from, to int)) {
	t.Helper()
	ctx := t.Context()
	_, err := q.Exec(ctx, `
ALTER TABLE rlmm_partitions SET (autovacuum_enabled = false);
ALTER TABLE rlmm_segments SET (autovacuum_enabled = false);
ALTER TABLE rlmm_segment_epochs SET (autovacuum_enabled = false);
ALTER TABLE rlmm_epoch_ends SET (autovacuum_enabled = false);`)
	require.NoError(t, err)
	analyze := func() {
		_, err := q.Exec(ctx, "ANALYZE rlmm_partitions, rlmm_segments, rlmm_segment_epochs, rlmm_epoch_ends")
		require.NoError(t, err)
	}
	switch state {
	case NeverAnalyzed:
		load(0, scale)
	case AnalyzedSmallGrown:
		load(0, 1)
		analyze()
		load(1, scale)
	case Analyzed:
		load(0, scale)
		analyze()
	case Vacuumed:
		load(0, scale)
		_, err := q.Exec(ctx, "VACUUM ANALYZE rlmm_partitions, rlmm_segments, rlmm_segment_epochs, rlmm_epoch_ends")
		require.NoError(t, err)
	}
}

// Compare measures the statements under every State, in parallel
// subtests, at the small size (scale 1; for AnalyzedSmallGrown, the
// analyzed small store it grew from) and at 100×, and calls check for each
// statement the large measurement names, in name order.
func Compare[M any](t *testing.T, measure func(t *testing.T, state State, scale int) map[string]M, check func(t *testing.T, name string, small, large M)) {
	for _, state := range States {
		t.Run(state.String(), func(t *testing.T) {
			t.Parallel()
			smallState := state
			if state == AnalyzedSmallGrown {
				smallState = Analyzed
			}
			small := measure(t, smallState, 1)
			large := measure(t, state, 100)
			for _, name := range slices.Sorted(maps.Keys(large)) {
				check(t, name, small[name], large[name])
			}
		})
	}
}
