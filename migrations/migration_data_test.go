package migrations_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/migrationdata"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/rstest"
	"github.com/krabka/remotestorage/migrations"
	"github.com/krabka/remotestorage/rlmmtest"
)

// migrationDataSeed is the seed of the migration data test's workload.
const migrationDataSeed = 7

// migrationDataDriver writes and reads the workload of package
// migrationdata with the code of an older commit.
var migrationDataDriver = oldProgram{
	name:  "migrationdata",
	files: map[string]string{"internal/migrationdata": "internal/migrationdata"},
	pkg:   "./internal/migrationdata/driver",
}

// migrationDataTables are the library's data tables, with the columns the
// rows are compared by: every column of the older schema but those the
// baseline dropped.
var migrationDataTables = []string{"rlmm_partitions", "rlmm_segments", "rlmm_segment_epochs", "rlmm_epoch_ends"}

// droppedByBaseline are the pre-release columns release 1's baseline does
// not keep: the marks that only the dropped bookkeeping triggers read, the
// bound of the lookups that read the epoch rows, and the partition's
// version and vanished version (the change feed is by transaction id: the
// version is kept as delete_version, the write order of its delete record).
var droppedByBaseline = map[string][]string{
	"rlmm_segments":   {"epoch_ends_raised"},
	"rlmm_partitions": {"purged_version", "max_epoch_span", "version", "vanished_version"},
	"rlmm_epoch_ends": {"max_segment_span", "raised_version"},
}

// keptByBaseline are, per table, the pre-release rows release 1's baseline
// keeps: the epoch rows of the segments that span several leader epochs
// (a segment of one is indexed by that epoch on rlmm_segments, whose rows
// are compared whole).
var keptByBaseline = map[string]string{
	"rlmm_segment_epochs": "EXISTS (SELECT FROM rlmm_segments s WHERE s.segment_id = x.segment_id AND cardinality(s.epochs) > 1)",
}

// A database populated by the code of the last pre-release schema (18,
// built from the commit before the one that added release 1's baseline,
// on the first-parent history, and migrated by that code's own migration
// chain) moves onto the baseline with every segment, epoch range, epoch end
// and partition delete state intact. The workload of package migrationdata
// (a few hundred segments in every state, several epochs, unclean
// elections, partition deletes, refused calls) is written by that code,
// and replayed into rlmmtest.Model in process. The old code's outcomes and
// answers equal the model's; after Migrate, every row of the data tables is
// there with the same values in every column the baseline keeps, and the
// current code's answers equal the model's. A test-only migration after
// the baseline that drops an epoch row and lowers an epoch end is caught.
func TestPreReleaseDataMovesOntoTheBaseline(t *testing.T) {
	t.Parallel()
	const from = migrations.Baseline - 1
	baseline, err := fs.Glob(migrations.FS(), fmt.Sprintf("%05d_*.sql", migrations.Baseline))
	require.NoError(t, err)
	require.Len(t, baseline, 1)
	old := commitBefore(t, baseline[0])
	require.Equal(t, int64(from), schemaAt(t, old), "the commit before the one that added %s", baseline[0])
	root := t.TempDir()
	build := sync.OnceValues(func() (string, error) { return buildOld(root, old, migrationDataDriver) })

	t.Run(fmt.Sprintf("schema %d to %d", from, rs.SchemaVersion), func(t *testing.T) {
		t.Parallel()
		bin, err := build()
		require.NoError(t, err)
		findings := migrationDataFindings(t, bin, from, migrations.FS(), rs.SchemaVersion)
		if len(findings) > 0 {
			t.Fatalf("schema %d (commit %.12s) to %d, seed %d:\n%s", from, old, rs.SchemaVersion, migrationDataSeed, strings.Join(findings, "\n"))
		}
	})
	t.Run("a migration that drops an epoch row and lowers an epoch end", func(t *testing.T) {
		t.Parallel()
		bin, err := build()
		require.NoError(t, err)
		fsys := withNext(t, fmt.Sprintf(`-- rlmm:compatible-with %d
-- +goose Up
DELETE FROM rlmm_segment_epochs
WHERE (topic_id, partition, segment_id, epoch) IN (
    SELECT e.topic_id, e.partition, e.segment_id, e.epoch
    FROM rlmm_segment_epochs e
    JOIN rlmm_partitions p ON p.topic_id = e.topic_id AND p.partition = e.partition
    WHERE e.state = 1 AND p.delete_state IS NULL
    ORDER BY e.topic_id, e.partition, e.segment_id, e.epoch LIMIT 1);
UPDATE rlmm_epoch_ends SET end_offset = end_offset - 1
WHERE (topic_id, partition, epoch) IN (
    SELECT ee.topic_id, ee.partition, ee.epoch
    FROM rlmm_epoch_ends ee
    JOIN rlmm_partitions p ON p.topic_id = ee.topic_id AND p.partition = ee.partition
    WHERE p.delete_state IS NULL AND ee.end_offset > 0
    ORDER BY ee.topic_id, ee.partition, ee.epoch DESC LIMIT 1);
-- +goose Down
SELECT 1;
`, rs.SchemaVersion))
		findings := migrationDataFindings(t, bin, from, fsys, rs.SchemaVersion+1)
		text := strings.Join(findings, "\n")
		require.Contains(t, text, "rlmm_segment_epochs: ", text)
		require.Contains(t, text, "rlmm_epoch_ends: ", text)
		require.Contains(t, text, "the current code after migrating to", text)
		require.NotContains(t, text, "the code of schema", "the old code's answers are the model's; only the migration broke them:\n%s", text)
	})
}

// migrationDataFindings writes the workload with the driver bin (the code
// of schema from) into a new database at that schema, migrates it with the
// migrations of fsys up to target, and returns what differs: the old
// code's outcomes and answers from the model's, the data tables' rows
// before and after the migration, and the current code's answers from the
// model's.
func migrationDataFindings(t *testing.T, bin string, from int64, fsys fs.FS, target int64) []string {
	t.Helper()
	ctx := t.Context()
	dsn := pgtest.NewEmptyDatabase(t)
	pool := rstest.NewPool(t, dsn, 0, false)
	cmd := exec.Command(bin, "-dsn", dsn, "-seed", strconv.Itoa(migrationDataSeed), "-migrate")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "the driver of schema %d: %s", from, stderr.String())
	var before migrationdata.Result
	require.NoError(t, json.Unmarshal(out, &before))

	w := migrationdata.Generate(migrationDataSeed)
	model := rlmmtest.NewModel(rs.DefaultMaxCustomMetadataBytes)
	want := migrationdata.Result{Outcomes: migrationdata.Apply(ctx, model, w), Answers: migrationdata.Answers(ctx, model, w)}
	oldCode := fmt.Sprintf("the code of schema %d", from)
	findings := answerFindings("outcome", want.Outcomes, oldCode, before.Outcomes)
	findings = append(findings, answerFindings("answer", want.Answers, oldCode, before.Answers)...)

	columns := map[string][]string{}
	for _, table := range migrationDataTables {
		rows, err := pool.Query(ctx, "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position", table)
		require.NoError(t, err)
		columns[table], err = pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		if target >= migrations.Baseline && from < migrations.Baseline {
			columns[table] = slices.DeleteFunc(columns[table], func(c string) bool { return slices.Contains(droppedByBaseline[table], c) })
		}
		require.NotEmpty(t, columns[table], table)
	}
	var kept map[string]string
	if target >= migrations.Baseline && from < migrations.Baseline {
		kept = keptByBaseline
	}
	rowsBefore := dataRows(t, pool, columns, kept)
	// Privileges on what keeps its name carry over the baseline.
	role := "grantee_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	for _, sql := range []string{
		"CREATE ROLE " + role,
		"GRANT SELECT, UPDATE ON rlmm_segments TO " + role,
		"GRANT SELECT ON rlmm_segments_v TO " + role,
		"GRANT EXECUTE ON FUNCTION rlmm_resync() TO " + role,
	} {
		_, err := pool.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP OWNED BY "+role+"; DROP ROLE "+role) })
	require.NoError(t, rstest.MigrateFSTo(ctx, pool, fsys, target))
	var privileges string
	require.NoError(t, pool.QueryRow(ctx, `SELECT concat_ws(' ',
		has_table_privilege($1, 'rlmm_segments', 'SELECT'), has_table_privilege($1, 'rlmm_segments', 'UPDATE'),
		has_table_privilege($1, 'rlmm_segments', 'DELETE'), has_table_privilege($1, 'rlmm_segments_v', 'SELECT'),
		has_function_privilege($1, 'rlmm_resync()', 'EXECUTE'), has_function_privilege($1, 'rlmm_purge(interval, integer)', 'EXECUTE'),
		has_sequence_privilege($1, 'rlmm_versions', 'USAGE'))`,
		role).Scan(&privileges))
	if privileges != "t t f t t f t" {
		findings = append(findings, "privileges of a role after the migration (SELECT, UPDATE, DELETE on rlmm_segments, SELECT on rlmm_segments_v, EXECUTE on rlmm_resync and rlmm_purge, USAGE on rlmm_versions): "+privileges+", want t t f t t f t")
	}
	var version int64
	require.NoError(t, pool.QueryRow(ctx, "SELECT max(version_id) FROM "+migrations.VersionTable+" WHERE is_applied").Scan(&version))
	require.Equal(t, target, version)
	rowsAfter := dataRows(t, pool, columns, nil)
	for _, table := range migrationDataTables {
		findings = append(findings, rowFindings(table, rowsBefore[table], rowsAfter[table])...)
	}

	after := migrationdata.Answers(ctx, rstest.NewManager(t, pool), w)
	findings = append(findings, answerFindings("answer", want.Answers, fmt.Sprintf("the current code after migrating to %d", target), after)...)
	t.Logf("%d steps (%d refused), %d answers compared; rows %s", len(want.Outcomes), refused(want.Outcomes), len(want.Answers), rowCounts(rowsBefore))
	return findings
}

// refused counts the outcomes that are errors.
func refused(outcomes []migrationdata.Answer) int {
	n := 0
	for _, o := range outcomes {
		if o.Got != "ok" {
			n++
		}
	}
	return n
}

func rowCounts(rows map[string][]string) string {
	var out []string
	for _, table := range migrationDataTables {
		out = append(out, fmt.Sprintf("%s %d", table, len(rows[table])))
	}
	return strings.Join(out, ", ")
}

// dataRows returns each table's rows (those where[table] selects, all
// without one), each the text of its columns, sorted.
func dataRows(t *testing.T, pool *pgxpool.Pool, columns map[string][]string, where map[string]string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, table := range migrationDataTables {
		var cols []string
		for _, c := range columns[table] {
			cols = append(cols, pgx.Identifier{c}.Sanitize())
		}
		sql := "SELECT row(" + strings.Join(cols, ", ") + ")::text FROM " + pgx.Identifier{table}.Sanitize() + " x"
		if w, ok := where[table]; ok {
			sql += " WHERE " + w
		}
		rows, err := pool.Query(t.Context(), sql)
		require.NoError(t, err)
		out[table], err = pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		slices.Sort(out[table])
	}
	return out
}

// rowFindings lists how table's rows after the migration differ from
// before: the count, then the rows gone and the rows new (a changed row is
// both), five of each at most.
func rowFindings(table string, before, after []string) []string {
	var out []string
	if len(before) != len(after) {
		out = append(out, fmt.Sprintf("%s: %d rows before the migration, %d after", table, len(before), len(after)))
	}
	diff := func(what string, a, b []string) {
		n := 0
		for _, r := range a {
			if _, found := slices.BinarySearch(b, r); found {
				continue
			}
			if n++; n <= 5 {
				out = append(out, fmt.Sprintf("%s: %s: %s", table, what, r))
			}
		}
		if n > 5 {
			out = append(out, fmt.Sprintf("%s: %s: %d more", table, what, n-5))
		}
	}
	diff("a row before the migration is not there after it", before, after)
	diff("a row after the migration was not there before it", after, before)
	return out
}

// answerFindings lists the probes where got differs from the model's want,
// twenty at most, then how many more; the lists ask the same probes in the
// same order, and the first probe where they do not ends the comparison.
func answerFindings(kind string, want []migrationdata.Answer, gotName string, got []migrationdata.Answer) []string {
	var out []string
	differ := 0
	for i := range max(len(want), len(got)) {
		if i >= len(want) || i >= len(got) || want[i].Probe != got[i].Probe {
			w, g := "nothing", "nothing"
			if i < len(want) {
				w = want[i].Probe
			}
			if i < len(got) {
				g = got[i].Probe
			}
			out = append(out, fmt.Sprintf("%s: %s %d is %q for the model and %q for %s; the rest is not compared", gotName, kind, i, w, g, gotName))
			break
		}
		if want[i].Got == got[i].Got {
			continue
		}
		if differ++; differ <= 20 {
			out = append(out, fmt.Sprintf("%s: %s %s:\n    model: %s\n    %s: %s", gotName, kind, want[i].Probe, want[i].Got, gotName, got[i].Got))
		}
	}
	if differ > 20 {
		out = append(out, fmt.Sprintf("%s: %d more %ss differ", gotName, differ-20, kind))
	}
	return out
}
