package remotestorage_test

// The queries of docs/DBA.md run against a seeded database, so the guide
// cannot go stale; and every table, view and column of the schema carries a
// comment for psql's \d+.

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/sampledata"
)

// dbaGuide is the DBA's guide, relative to the module root (the tests' working
// directory); dbaQueriesHeading opens the section whose queries run here.
const (
	dbaGuide          = "docs/DBA.md"
	dbaQueriesHeading = "## Queries"
)

// dbaQuery is one ```sql block of the guide's Queries section.
type dbaQuery struct {
	heading string // the ### heading above it
	sql     string
}

// noRowsMarker in a query says that it must return no rows (a check).
const noRowsMarker = "-- Expect no rows."

// dbaQueriesSection returns the guide's Queries section, up to the next
// "## " heading.
func dbaQueriesSection(t *testing.T) string {
	t.Helper()
	guide, err := os.ReadFile(dbaGuide)
	require.NoError(t, err)
	_, section, found := strings.Cut(string(guide), "\n"+dbaQueriesHeading+"\n")
	require.True(t, found, "%s has no %q section", dbaGuide, dbaQueriesHeading)
	section, _, _ = strings.Cut(section, "\n## ")
	return section
}

// dbaQueries extracts the ```sql blocks of the guide's Queries section.
func dbaQueries(t *testing.T) []dbaQuery {
	t.Helper()
	section := dbaQueriesSection(t)
	var queries []dbaQuery
	heading := ""
	var block *strings.Builder
	for _, line := range strings.Split(section, "\n") {
		switch {
		case block != nil && strings.TrimSpace(line) == "```":
			queries = append(queries, dbaQuery{heading: heading, sql: block.String()})
			block = nil
		case block != nil:
			block.WriteString(line + "\n")
		case strings.TrimSpace(line) == "```sql":
			require.NotEmpty(t, heading, "a query of the Queries section has no ### heading above it")
			block = &strings.Builder{}
		case strings.HasPrefix(line, "### "):
			heading = strings.TrimPrefix(line, "### ")
		}
	}
	require.Nil(t, block, "unterminated ```sql block under %q", heading)
	return queries
}

func TestDBAQueries(t *testing.T) {
	t.Parallel()
	queries := dbaQueries(t)
	require.GreaterOrEqual(t, len(queries), 10, dbaGuide+" promises ready queries: at least ten")
	pool := pgtest.NewPool(t)
	sampledata.Seed(t, pool)
	ctx := t.Context()

	t.Run("views", func(t *testing.T) {
		var epochs, state, size, deleteState string
		var sizeBytes, offsets int64
		var forgotten bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT epochs, state, size, size_bytes, offset_count, forgotten, partition_delete_state
			FROM rlmm_segments_v WHERE topic = 'orders' AND partition = 0 AND start_offset = 1000`).
			Scan(&epochs, &state, &size, &sizeBytes, &offsets, &forgotten, &deleteState))
		require.Equal(t, "0:1000, 1:1200", epochs)
		require.Equal(t, "COPY_SEGMENT_FINISHED", state)
		require.Equal(t, "1100 bytes", size)
		require.EqualValues(t, 1100, sizeBytes)
		require.EqualValues(t, 1000, offsets)
		require.False(t, forgotten)
		require.Equal(t, "NONE", deleteState)

		var counts [4]int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT copy_started, copy_finished, delete_started, delete_finished, size_bytes, delete_state
			FROM rlmm_partitions_v WHERE topic = 'orders' AND partition = 0`).
			Scan(&counts[0], &counts[1], &counts[2], &counts[3], &sizeBytes, &deleteState))
		require.Equal(t, [4]int64{1, 3, 1, 1}, counts)
		require.EqualValues(t, 1000+1100+1300+1400+1500, sizeBytes, "the segments not forgotten")
		require.Equal(t, "NONE", deleteState)
		require.NoError(t, pool.QueryRow(ctx, `SELECT size_bytes, delete_state FROM rlmm_partitions_v WHERE topic = 'audit'`).
			Scan(&sizeBytes, &deleteState))
		require.Zero(t, sizeBytes, "a deleted partition holds nothing")
		require.Equal(t, "DELETE_PARTITION_FINISHED", deleteState)

		// A count of 2^63 does not fit a bigint: NULL, not an error.
		var edgeCount, edgeEpochCount *int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT s.offset_count, e.offset_count
			FROM rlmm_segments_v s JOIN rlmm_segment_epochs_v e USING (topic_id, partition, segment_id)
			WHERE s.topic = 'edge' AND s.end_offset = 9223372036854775807`).Scan(&edgeCount, &edgeEpochCount))
		require.Nil(t, edgeCount)
		require.Nil(t, edgeEpochCount)
		require.NoError(t, pool.QueryRow(ctx, `SELECT s.offset_count, e.offset_count
			FROM rlmm_segments_v s JOIN rlmm_segment_epochs_v e USING (topic_id, partition, segment_id)
			WHERE s.topic = 'edge' AND s.end_offset = 10`).Scan(&edgeCount, &edgeEpochCount))
		require.EqualValues(t, 6, *edgeCount)
		require.EqualValues(t, 6, *edgeEpochCount)

		var answers bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT bool_or(answers_lookups) FROM rlmm_segment_epochs_v WHERE topic = 'audit'`).Scan(&answers))
		require.False(t, answers, "a deleted partition answers no lookup")
		require.NoError(t, pool.QueryRow(ctx, `SELECT bool_or(forgotten) FROM rlmm_segments_v WHERE topic = 'audit'`).Scan(&forgotten))
		require.True(t, forgotten)
	})

	for _, q := range queries {
		t.Run(q.heading, func(t *testing.T) {
			// Read-only, as promised: a query that writes fails here.
			tx, err := pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
			require.NoError(t, err)
			defer tx.Rollback(context.Background()) //nolint:errcheck // read-only
			rows, err := tx.Query(ctx, q.sql)
			require.NoError(t, err)
			n := 0
			for rows.Next() {
				n++
			}
			require.NoError(t, rows.Err(), "%s", q.sql)
			if strings.Contains(q.sql, noRowsMarker) {
				require.Zero(t, n, "a check that should find nothing found %d rows:\n%s", n, q.sql)
			} else {
				require.NotZero(t, n, "the seeded database has something for every query; this one returned nothing:\n%s", q.sql)
			}
		})
	}
}

// TestDBAQueriesExtraction: the extraction sees what a reader sees.
func TestDBAQueriesExtraction(t *testing.T) {
	t.Parallel()
	queries := dbaQueries(t)
	require.Equal(t, strings.Count(dbaQueriesSection(t), "```sql"), len(queries))
	for _, q := range queries {
		require.True(t, strings.HasSuffix(strings.TrimSpace(q.sql), ";"), "end %q with a semicolon, for psql", q.heading)
	}
}

// TestRepairGuideIsWhereTheHintsSay: the guards' HINT says 'See
// docs/DBA.md, "Repairs".'; the guide keeps that section, and the README's
// "Repairs" points at it.
func TestRepairGuideIsWhereTheHintsSay(t *testing.T) {
	t.Parallel()
	schema, err := os.ReadFile("schema.sql")
	require.NoError(t, err)
	require.Contains(t, string(schema), `HINT = 'See docs/DBA.md, "Repairs".'`)
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	_, section, found := strings.Cut(string(readme), "\n### Repairs\n")
	require.True(t, found, `README.md has no "### Repairs" heading`)
	section, _, _ = strings.Cut(section, "\n#")
	require.Contains(t, section, "("+dbaGuide+"#repairs)")
	guide, err := os.ReadFile(dbaGuide)
	require.NoError(t, err)
	require.Contains(t, string(guide), "\n## Repairs\n")
}

// TestSchemaIsCommented: every table, view and column of the schema has a
// comment (goose's own version table aside).
func TestSchemaIsCommented(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	rows, err := pool.Query(t.Context(), `
		SELECT c.relname, coalesce(a.attname, '')
		FROM pg_class c
		LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
		WHERE c.relnamespace = current_schema()::regnamespace
		  AND c.relkind IN ('r', 'v') AND c.relname LIKE 'rlmm%' AND c.relname NOT IN ('rlmm_goose_db_version', 'rlmm_goose_lock')
		  AND (obj_description(c.oid, 'pg_class') IS NULL
		       OR (a.attname IS NOT NULL AND col_description(c.oid, a.attnum) IS NULL))
		ORDER BY 1, 2`)
	require.NoError(t, err)
	missing, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
		var rel, col string
		err := row.Scan(&rel, &col)
		return strings.TrimSuffix(rel+"."+col, "."), err
	})
	require.NoError(t, err)
	require.Empty(t, missing, "COMMENT ON these")

	var views int
	require.NoError(t, pool.QueryRow(t.Context(),
		"SELECT count(*) FROM pg_views WHERE schemaname = current_schema() AND viewname ~ $1", regexp.QuoteMeta("rlmm_")+".*_v$").Scan(&views))
	require.Equal(t, 4, views) // 00002: segments, epochs, partitions; 00005: stuck
}
