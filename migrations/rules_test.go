package migrations

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	createIndexRE = regexp.MustCompile(`(?is)^\s*CREATE\s+(?:UNIQUE\s+)?INDEX\s+(CONCURRENTLY\s+)?(?:IF\s+NOT\s+EXISTS\s+)?\w*\s*ON\s+(?:ONLY\s+)?(\w+)`)
	createTableRE = regexp.MustCompile(`(?is)^\s*CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)`)
	lockTableRE   = regexp.MustCompile(`(?is)^\s*LOCK\s+(?:TABLE\s+)?(?:ONLY\s+)?([\w\s,]+?)\s+IN\s`)
	dmlRE         = regexp.MustCompile(`(?is)^\s*(?:WITH\b.*)?\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM|MERGE\s+INTO)\s+(?:ONLY\s+)?(\w+)`)
	validateRE    = regexp.MustCompile(`(?is)^\s*ALTER\s+TABLE\s+(?:ONLY\s+)?(\w+)\s+VALIDATE\s+CONSTRAINT`)
	blockStartRE  = regexp.MustCompile(`(?is)^\s*(CREATE\s+(OR\s+REPLACE\s+)?(FUNCTION|PROCEDURE|TRIGGER)|DO\b)`)
)

// dataTablesNamed returns the data tables a statement names, in the
// writers' lock order.
func dataTablesNamed(stmt string) []string {
	var out []string
	for _, table := range WriterLockOrder {
		if regexp.MustCompile(`\b` + table + `\b`).MatchString(stmt) {
			out = append(out, table)
		}
	}
	return out
}

// ruleViolations checks one migration file against the rules.
func ruleViolations(s source) []string {
	var out []string
	bad := func(format string, args ...any) {
		out = append(out, fmt.Sprintf("%s: ", s.name)+fmt.Sprintf(format, args...))
	}
	created := map[string]bool{}
	for _, up := range []bool{true, false} {
		for _, stmt := range splitStatements(section(s.text, up)) {
			if m := createTableRE.FindStringSubmatch(stmt); m != nil {
				created[m[1]] = true
			}
			// Function bodies and DO blocks run later, or are checked by
			// the tests of what they do.
			function := blockStartRE.MatchString(stmt)
			if m := createIndexRE.FindStringSubmatch(stmt); m != nil && slices.Contains(WriterLockOrder, m[2]) && !created[m[2]] {
				if !s.noTx || m[1] == "" {
					bad("index on %s is not built concurrently: write CREATE INDEX CONCURRENTLY in a -- +goose NO TRANSACTION file (a plain CREATE INDEX blocks every write to the table while it builds)", m[2])
				}
			}
			if m := validateRE.FindStringSubmatch(stmt); m != nil && slices.Contains(WriterLockOrder, m[1]) && !s.noTx {
				bad("VALIDATE CONSTRAINT on %s in a transactional file scans the table under Migrate's ACCESS EXCLUSIVE lock: validate in a -- +goose NO TRANSACTION file", m[1])
			}
			if s.noTx && !function {
				if tables := dataTablesNamed(stmt); len(tables) > 1 {
					bad("a statement of a NO TRANSACTION file names %s: it runs without Migrate's prelude and may lock them against the writers' order (%s); change several data tables in a transactional file", strings.Join(tables, " and "), strings.Join(WriterLockOrder, ", "))
				}
			}
			if m := lockTableRE.FindStringSubmatch(stmt); m != nil {
				var order []int
				for _, name := range strings.Split(m[1], ",") {
					if i := slices.Index(WriterLockOrder, strings.TrimSpace(name)); i >= 0 {
						order = append(order, i)
					}
				}
				if !slices.IsSorted(order) {
					bad("LOCK %s: lock the data tables in the writers' order, %s", strings.TrimSpace(m[1]), strings.Join(WriterLockOrder, ", "))
				}
			}
			if m := dmlRE.FindStringSubmatch(stmt); m != nil && !function && slices.Contains(WriterLockOrder, m[2]) && !created[m[2]] {
				bad("%s %s in the migration itself: a backfill is a function that the migration calls, that stamps each segment whose rows it changes with its own transaction (last_xid) and a greater last_version, and that changes nothing when run again (TestMigrationBackfillsStampTheFeed)", strings.ToUpper(strings.Join(strings.Fields(m[1]), " ")), m[2])
			}
		}
	}
	return out
}

// TestMigrationRules holds every migration from RulesFrom on to the rules
// of docs/MIGRATIONS.md that can be read from its text: indexes on the data
// tables built concurrently, no statement outside Migrate's prelude that
// touches two data tables, locks in the writers' order, no validation
// under the prelude's lock, and backfills in functions (whose behaviour
// TestMigrationBackfillsStampTheFeed checks).
func TestMigrationRules(t *testing.T) {
	t.Parallel()
	srcs, err := sources(files)
	require.NoError(t, err)
	for _, s := range srcs {
		if s.version < RulesFrom {
			continue
		}
		require.Empty(t, ruleViolations(s))
	}
}

// The checks catch what they are meant to: each bad file is refused, and
// its fixed form passes.
func TestMigrationRulesRefuse(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, bad, good, complaint string
	}{
		{
			"index built in a transaction",
			"-- +goose Up\nCREATE INDEX rlmm_segments_x_idx ON rlmm_segments (broker_id);\n-- +goose Down\nDROP INDEX rlmm_segments_x_idx;\n",
			"-- +goose NO TRANSACTION\n-- +goose Up\nCREATE INDEX CONCURRENTLY rlmm_segments_x_idx ON rlmm_segments (broker_id);\n-- +goose Down\nDROP INDEX CONCURRENTLY rlmm_segments_x_idx;\n",
			"not built concurrently",
		},
		{
			"index of a new table",
			"-- +goose NO TRANSACTION\n-- +goose Up\nCREATE INDEX rlmm_segments_x_idx ON rlmm_segments (broker_id);\n",
			"-- +goose Up\nCREATE TABLE rlmm_epoch_ends (x int);\nCREATE INDEX rlmm_epoch_ends_x_idx ON rlmm_epoch_ends (x);\n",
			"not built concurrently",
		},
		{
			"two tables outside the prelude",
			"-- +goose NO TRANSACTION\n-- +goose Up\nALTER TABLE rlmm_segment_epochs ADD CONSTRAINT x FOREIGN KEY (segment_id) REFERENCES rlmm_segments (segment_id) NOT VALID;\n",
			"-- +goose Up\nALTER TABLE rlmm_segment_epochs ADD CONSTRAINT x FOREIGN KEY (segment_id) REFERENCES rlmm_segments (segment_id) NOT VALID;\n",
			"names rlmm_segments and rlmm_segment_epochs",
		},
		{
			"locks against the writers' order",
			"-- +goose Up\nLOCK TABLE rlmm_segments, rlmm_partitions IN SHARE MODE;\n",
			"-- +goose Up\nLOCK TABLE rlmm_partitions, rlmm_segments IN SHARE MODE;\n",
			"writers' order",
		},
		{
			"validation under the prelude",
			"-- +goose Up\nALTER TABLE rlmm_segment_epochs VALIDATE CONSTRAINT x;\n",
			"-- +goose NO TRANSACTION\n-- +goose Up\nALTER TABLE rlmm_segment_epochs VALIDATE CONSTRAINT x;\n",
			"VALIDATE CONSTRAINT",
		},
		{
			"backfill in the migration",
			"-- +goose Up\nUPDATE rlmm_segments SET broker_id = 0 WHERE broker_id IS NULL;\n",
			"-- +goose Up\n-- +goose StatementBegin\nCREATE FUNCTION rlmm_x() RETURNS void LANGUAGE sql AS $$ UPDATE rlmm_segments SET broker_id = 0 $$;\n-- +goose StatementEnd\nSELECT rlmm_x();\n",
			"a backfill is a function",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			parse := func(text string) source {
				return source{version: RulesFrom, name: "00008_x.sql", text: text, noTx: noTxRE.MatchString(text)}
			}
			v := ruleViolations(parse(c.bad))
			require.Len(t, v, 1)
			require.Contains(t, v[0], c.complaint)
			require.Empty(t, ruleViolations(parse(c.good)))
		})
	}
}

// The prelude takes ACCESS EXCLUSIVE only for the migrations that need it,
// and lets reads go on during the others.
func TestPreludeLockMode(t *testing.T) {
	t.Parallel()
	srcs, err := sources(files)
	require.NoError(t, err)
	require.Equal(t, [2]string{"ACCESS EXCLUSIVE", "ACCESS EXCLUSIVE"}, [2]string{srcs[0].lockMode(true), srcs[0].lockMode(false)}, "the baseline (up, down)")
	for text, want := range map[string][2]string{
		"-- +goose Up\nCREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1';\n-- +goose Down\nDROP FUNCTION f();\n":        {"EXCLUSIVE", "EXCLUSIVE"},
		"-- +goose Up\nALTER TABLE rlmm_segments ADD COLUMN c text;\n-- +goose Down\nALTER TABLE rlmm_segments DROP COLUMN c;\n": {"ACCESS EXCLUSIVE", "ACCESS EXCLUSIVE"},
		"-- +goose Up\nCREATE TABLE t (a int);\n-- +goose Down\nDROP TABLE t;\n":                                                 {"EXCLUSIVE", "ACCESS EXCLUSIVE"},
	} {
		s := source{version: RulesFrom, name: "x.sql", text: text}
		require.Equal(t, want, [2]string{s.lockMode(true), s.lockMode(false)}, "%s (up, down)", text)
	}
}

// The compatibility window (docs/MIGRATIONS.md, "Releases"): every
// migration after a release's schema declares the code of that release
// compatible, so that its brokers keep working while the database moves to
// the next release; and none claims code older than the baseline, which
// cannot run on it.
func TestMigrationsKeepTheWindow(t *testing.T) {
	t.Parallel()
	compat, err := Compatibility(files)
	require.NoError(t, err)
	srcs, err := sources(files)
	require.NoError(t, err)
	require.Equal(t, int64(Baseline), srcs[0].version, "the baseline is the first migration shipped")
	_, declared := compat[Baseline]
	require.False(t, declared, "the baseline declares no older code compatible: pre-release code cannot run on it")
	require.Equal(t, int64(Baseline), Releases[0].Schema, "release 1 is the baseline")
	for _, s := range srcs[1:] {
		r := ReleaseOf(s.version)
		prev := Releases[len(Releases)-1].Schema // an unreleased migration: the newest release's
		if r > 0 {
			prev = Releases[r-2].Schema
		}
		oldest, ok := compat[s.version]
		require.True(t, ok, "%s declares no \"-- rlmm:compatible-with\" line: brokers of the release before it would refuse the schema", s.name)
		require.GreaterOrEqual(t, oldest, Baseline, "%s declares code older than the baseline compatible", s.name)
		require.LessOrEqual(t, oldest, prev, "%s must declare the code of the release before it (schema %d) compatible", s.name, prev)
	}
}

// A released migration never changes (docs/MIGRATIONS.md, "Releases"):
// databases out there ran it, and goose never runs it again. A change of
// the schema after a release is a migration of its own.
func TestReleasedMigrationsNeverChange(t *testing.T) {
	t.Parallel()
	for _, r := range Releases {
		got, err := digest(r.Schema)
		require.NoError(t, err)
		require.Equal(t, r.Digest, got, "the migrations up to %d shipped in release %d and must not change: "+
			"undo the change and add a migration after %d (docs/MIGRATIONS.md, \"The rule: expand, then contract\")",
			r.Schema, r.Number, Latest())
	}
	all, err := digest(math.MaxInt64)
	require.NoError(t, err)
	h, err := Hash()
	require.NoError(t, err)
	require.Equal(t, all[:12], h)
}
