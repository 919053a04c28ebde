package migrations

import (
	"fmt"
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
				bad("%s %s in the migration itself: a backfill is a function (like rlmm_raise_epoch_ends()) that the migration calls, that bumps the version of each partition it changes and stamps what it writes with it, and that changes nothing when run again (TestMigrationBackfillsBumpVersions)", strings.ToUpper(strings.Join(strings.Fields(m[1]), " ")), m[2])
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
// TestMigrationBackfillsBumpVersions checks).
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
	// 00005, written before the rules, builds its indexes in its
	// transaction: the checks see it (Migrate builds them concurrently
	// first).
	i := slices.IndexFunc(srcs, func(s source) bool { return s.version == 5 })
	require.GreaterOrEqual(t, i, 0)
	v := ruleViolations(srcs[i])
	require.Len(t, v, 2)
	require.Contains(t, v[0], "index on rlmm_segments is not built concurrently")
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
	got := map[int64][2]string{}
	for _, s := range srcs {
		got[s.version] = [2]string{s.lockMode(true), s.lockMode(false)}
	}
	for version, want := range map[int64][2]string{
		4:  {"EXCLUSIVE", "ACCESS EXCLUSIVE"},
		5:  {"EXCLUSIVE", "ACCESS EXCLUSIVE"},
		6:  {"ACCESS EXCLUSIVE", "ACCESS EXCLUSIVE"},
		7:  {"ACCESS EXCLUSIVE", "ACCESS EXCLUSIVE"},
		12: {"EXCLUSIVE", "ACCESS EXCLUSIVE"},
	} {
		require.Equal(t, want, got[version], "migration %d (up, down)", version)
	}
}
