package remotestorage_test

// The SQL of README.md and docs/*.md runs here, as the docs write it, so
// that a doc cannot tell a reader to run something that fails. The blocks
// are read from the Markdown at each run: an edit of a doc changes what
// runs, and a new block fails TestDocsSQL until docSQLCases says how it
// runs or why it does not.
//
// What counts as SQL a doc holds:
//   - every ```sql block;
//   - every psql command line in any other fenced block: its -c argument
//     (psql sends it as one query, as this test does), or, without -c, the
//     session it opens;
//   - every inline code span that starts with an SQL command's keyword and
//     goes on (`SELECT rlmm_resync()`, not `UPDATE`).
//
// What runs where:
//   - a ```sql block runs statement by statement on one session, as psql
//     runs a script, on a database of its own, migrated, with the data it
//     needs written through the library first; a psql -c argument or an
//     inline statement runs as one query;
//   - the GRANTs of docs/OPERATIONS.md ("Database roles") run in a new
//     database whose schema cluster_a, the doc's, is migrated by the
//     superuser, for a role of their own (rlmm_app renamed: roles belong
//     to the whole server); then a broker logged in as that role migrates,
//     adds, updates, looks up, deletes a partition and purges, so that a
//     missing GRANT fails here;
//   - the server settings of docs/RUNBOOK.md (ALTER SYSTEM, CHECKPOINT,
//     pg_stat_replication) run on a throwaway server of their own, never
//     on the server the other tests share;
//   - the read-only queries of docs/DBA.md's "Queries" section run in
//     TestDBAQueries (schema_test.go), on a seeded database where each must
//     return rows; here the test checks that each is one of those.
//
// What does not run, with the reason, is in docSQLCases (skip); two kinds
// of inline span are passed over without an entry: those holding an
// ellipsis or a <placeholder> (an outline of a statement, as
// `UPDATE cluster_a.rlmm_segments …`), and those of keywords alone (a
// command named in prose, as `CREATE INDEX CONCURRENTLY`).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgcluster"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/sampledata"
	"github.com/krabka/remotestorage/internal/testwait"
	"github.com/krabka/remotestorage/migrations"
)

// The kinds of SQL a doc holds.
const (
	sqlBlock        = "```sql block"
	psqlCommand     = "psql -c command"
	psqlSession     = "psql session"
	inlineStatement = "inline statement"
)

// docSQL is one piece of SQL in a doc.
type docSQL struct {
	file    string // relative to the module root
	line    int    // of its first line
	kind    string
	section string // the "## " heading it is under
	sql     string // a psqlSession's command line
}

func (d docSQL) String() string { return fmt.Sprintf("%s:%d (%s)", d.file, d.line, d.kind) }

// docSQLCase says how one piece of SQL runs, or why it does not.
type docSQLCase struct {
	file     string
	kind     string // when set, the piece must be of this kind
	section  string // when set, the piece must be under this "## " heading
	contains string // a part of the piece that tells it from the others
	skip     string // why the test does not run it; else run runs it
	run      func(t *testing.T, d docSQL)
}

// docSQLCases covers every piece of SQL of the docs. The first that
// matches a piece decides.
var docSQLCases = []docSQLCase{
	// docs/DBA.md
	{file: "docs/DBA.md", contains: `psql "$DATABASE_URL"`,
		skip: "opens an interactive psql on the schema: no statement of its own"},
	{file: "docs/DBA.md", kind: sqlBlock, section: "Queries", run: runDBAQuery},
	{file: "docs/DBA.md", contains: "SELECT rlmm_set_segment_state('0b7f4c1e-3f0a-4c55-9d0e-6a3f1c2b9e11'", run: runRepairFunctions},
	{file: "docs/DBA.md", contains: "DELETE FROM rlmm_segments WHERE segment_id", run: runRawDelete},
	{file: "docs/DBA.md", contains: "SELECT rlmm_purge('30 days')", run: runPurge},
	{file: "docs/DBA.md", contains: "SELECT rlmm_resync()", run: runResync},
	{file: "docs/DBA.md", contains: "TRUNCATE rlmm_segments",
		skip: "says that a TRUNCATE of the segments needs CASCADE, not a step to take (the DBA role may not TRUNCATE: TestRolesSQL)"},
	{file: "docs/DBA.md", contains: "SET session_replication_role = replica",
		skip: "names the setting that disables the guards, which the guide warns about; TestCacheHonestThroughDBARepairs writes with it"},

	// docs/OPERATIONS.md
	{file: "docs/OPERATIONS.md", contains: "GRANT ", run: runBrokerGrants},
	{file: "docs/OPERATIONS.md", contains: "CREATE SCHEMA cluster_a", run: runCreateSchemas},
	{file: "docs/OPERATIONS.md", contains: "FROM rlmm_stuck_v", run: runStuck},
	{file: "docs/OPERATIONS.md", contains: "SELECT rlmm_resync()", run: runResync},

	// README.md
	{file: "README.md", contains: "SELECT rlmm_resync()", run: runResync},

	// docs/MIGRATIONS.md
	{file: "docs/MIGRATIONS.md", contains: "-- rlmm:compatible-with",
		skip: "a line of a migration file, which Migrate reads, not a statement (migrations/rules_test.go checks the declarations)"},
	{file: "docs/MIGRATIONS.md", contains: "INSERT INTO rlmm_schema_compat", run: runCompatDeclaration},

	// docs/RUNBOOK.md: on a server of their own.
	{file: "docs/RUNBOOK.md", contains: "synchronous_standby_names = ''", run: runRunbookSetting("")},
	{file: "docs/RUNBOOK.md", contains: "synchronous_standby_names = 'node1'", run: runRunbookSetting("node1")},
	{file: "docs/RUNBOOK.md", contains: "CHECKPOINT", run: runRunbookQuery},
	{file: "docs/RUNBOOK.md", contains: "FROM pg_stat_replication", run: runRunbookQuery},
	{file: "docs/RUNBOOK.md", contains: "SELECT pg_promote()",
		skip: "promotes a standby, and fails on a primary; reliability/failover_test.go promotes its standby with pg_ctl promote, the step's other spelling"},

	// docs/SCALING.md
	{file: "docs/SCALING.md", contains: "create_distributed_table",
		skip: "needs the Citus extension, which the test server does not have"},

	// docs/PERFORMANCE.md
	{file: "docs/PERFORMANCE.md", contains: "SELECT 1",
		skip: "the bare round trip a measurement is compared with, not a step"},
}

// docFiles are the Markdown files whose SQL runs.
func docFiles(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("docs/*.md")
	require.NoError(t, err)
	return append([]string{"README.md"}, docs...)
}

var (
	// psqlRe finds a psql command in a line of a fenced block, and its -c
	// argument when it has one.
	psqlRe = regexp.MustCompile(`(?:^|[\s;&|(])psql\b(?:[^#\n]*?\s-c\s+(?:'([^']*)'|"([^"]*)"|([^\s'"#]+)))?`)
	// inlineRe finds inline code spans.
	inlineRe = regexp.MustCompile("`([^`]+)`")
	// statementRe tells an inline span that holds a statement.
	statementRe = regexp.MustCompile(`^(SELECT|INSERT|UPDATE|DELETE|MERGE|WITH|ALTER|GRANT|REVOKE|BEGIN|CREATE|DROP|TRUNCATE|SET|RESET|VACUUM|ANALYZE|CHECKPOINT|COMMENT|COPY|CALL)\s+\S`)
	// keywordsRe tells a span of keywords alone: a command named in prose.
	keywordsRe = regexp.MustCompile(`^[A-Z]+(?: [A-Z]+)*(?: \([A-Z, ]+\))?$`)
	// elidedRe tells an outline of a statement.
	elidedRe = regexp.MustCompile(`…|\.\.\.|<[a-z][a-z _-]*>`)
	// sectionRe finds the "## " headings.
	sectionRe = regexp.MustCompile(`(?m)^## (.*)$`)
)

// docSQLs extracts the SQL of file. Inline spans that are outlines or
// keywords alone are left out.
func docSQLs(t *testing.T, file string) []docSQL {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	lines := strings.Split(string(b), "\n")
	var out []docSQL
	prose := make([]string, len(lines)) // the lines outside fences, the others blank
	section := ""
	var fence *docSQL // the open fence: its line, and its info string in kind
	indent := 0
	var block strings.Builder
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		switch {
		case fence == nil && strings.HasPrefix(trimmed, "```"):
			fence = &docSQL{file: file, line: i + 2, kind: strings.TrimPrefix(trimmed, "```"), section: section}
			indent = len(line) - len(strings.TrimLeft(line, " "))
			block.Reset()
		case fence != nil && trimmed == "```":
			if fence.kind == "sql" {
				fence.kind, fence.sql = sqlBlock, block.String()
				out = append(out, *fence)
			}
			fence = nil
		case fence != nil:
			content := strings.TrimPrefix(line, strings.Repeat(" ", min(indent, len(line)-len(strings.TrimLeft(line, " ")))))
			block.WriteString(content + "\n")
			if fence.kind == "sql" {
				break
			}
			for _, m := range psqlRe.FindAllStringSubmatch(content, -1) {
				d := docSQL{file: file, line: i + 1, section: section}
				switch arg := m[1] + m[2] + m[3]; {
				case strings.Contains(m[0], " -c "):
					d.kind, d.sql = psqlCommand, arg
				default:
					d.kind, d.sql = psqlSession, strings.TrimSpace(content)
				}
				out = append(out, d)
			}
		default:
			prose[i] = line
			if strings.HasPrefix(line, "## ") {
				section = strings.TrimPrefix(line, "## ")
			}
		}
	}
	if fence != nil {
		t.Fatalf("%s:%d: a fenced block that never closes", file, fence.line-1)
	}

	text := strings.Join(prose, "\n")
	sectionAt := func(offset int) string {
		s := ""
		for _, m := range sectionRe.FindAllStringSubmatchIndex(text[:offset], -1) {
			s = text[m[2]:m[3]]
		}
		return s
	}
	for _, m := range inlineRe.FindAllStringSubmatchIndex(text, -1) {
		span := strings.Join(strings.Fields(text[m[2]:m[3]]), " ")
		if !statementRe.MatchString(span) || keywordsRe.MatchString(span) || elidedRe.MatchString(span) {
			continue
		}
		out = append(out, docSQL{file: file, line: strings.Count(text[:m[0]], "\n") + 1, kind: inlineStatement,
			section: sectionAt(m[0]), sql: span})
	}
	slices.SortFunc(out, func(a, b docSQL) int { return a.line - b.line })
	return out
}

// caseFor returns the index of the first case of docSQLCases that matches d.
func caseFor(d docSQL) int {
	for i, c := range docSQLCases {
		if c.file == d.file && (c.kind == "" || c.kind == d.kind) && (c.section == "" || c.section == d.section) && strings.Contains(d.sql, c.contains) {
			return i
		}
	}
	return -1
}

// TestDocsSQL runs every piece of SQL of the docs (see the top of the file).
func TestDocsSQL(t *testing.T) {
	t.Parallel()
	t.Cleanup(stopRunbookServer) // after every subtest
	used := make([]bool, len(docSQLCases))
	for _, file := range docFiles(t) {
		for _, d := range docSQLs(t, file) {
			i := caseFor(d)
			if i < 0 {
				t.Errorf("%s is SQL no case of docSQLCases (docs_sql_test.go) covers: add one that runs it, or says why not:\n%s", d, d.sql)
				continue
			}
			used[i] = true
			c := docSQLCases[i]
			if c.skip != "" {
				continue // not run, for the reason the case gives
			}
			t.Run(strings.TrimPrefix(d.file, "docs/")+":"+fmt.Sprint(d.line), func(t *testing.T) {
				t.Parallel()
				c.run(t, d)
			})
		}
	}
	for i, c := range docSQLCases {
		if !used[i] {
			t.Errorf("docSQLCases: no SQL of %s matches the case %q (section %q): the doc changed; update or drop the case", c.file, c.contains, c.section)
		}
	}
}

// TestDocsSQLExtraction: the extraction finds what a reader sees, and a
// statement splits where psql splits it.
func TestDocsSQLExtraction(t *testing.T) {
	t.Parallel()
	var kinds []string
	for _, d := range docSQLs(t, "docs/OPERATIONS.md") {
		kinds = append(kinds, d.kind)
		if d.kind == psqlCommand {
			require.Equal(t, "CREATE SCHEMA cluster_a; CREATE SCHEMA cluster_b", d.sql, d.String())
		}
		if d.kind == sqlBlock {
			require.True(t, strings.HasPrefix(d.sql, "GRANT USAGE ON SCHEMA cluster_a TO rlmm_app;\n"), "the indented block, unindented: %s\n%s", d, d.sql)
		}
	}
	require.Contains(t, kinds, sqlBlock)
	require.Contains(t, kinds, psqlCommand)
	require.Contains(t, kinds, inlineStatement)
	var dbaBlocks int
	for _, d := range docSQLs(t, dbaGuide) {
		if d.kind == sqlBlock && d.section == "Queries" {
			dbaBlocks++
		}
	}
	require.Equal(t, len(dbaQueries(t)), dbaBlocks, "the Queries blocks TestDBAQueries runs")

	got := splitStatements("-- a comment; not a statement\nSELECT 'a;b', \"c;d\";\n" +
		"DO $x$ BEGIN PERFORM 1; END $x$;\n/* ; */ SELECT 2;\n-- trailing\n")
	require.Equal(t, []statement{
		{line: 1, sql: "-- a comment; not a statement\nSELECT 'a;b', \"c;d\";"},
		{line: 3, sql: "DO $x$ BEGIN PERFORM 1; END $x$;"},
		{line: 4, sql: "/* ; */ SELECT 2;"},
	}, got)
}

// statement is one statement of a block, and the line of the block it
// starts on (1: the first).
type statement struct {
	line int
	sql  string
}

// splitStatements splits a script where psql would: at each semicolon
// outside quotes, dollar quotes and comments. What follows the last
// semicolon is dropped when it is only comments.
func splitStatements(script string) []statement {
	var out []statement
	start, line, startLine := 0, 1, 1
	onlyComments := func(s string) bool {
		for _, l := range strings.Split(s, "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "--") {
				return false
			}
		}
		return true
	}
	flush := func(end int) {
		if s := strings.TrimSpace(script[start:end]); s != "" && !onlyComments(s) {
			out = append(out, statement{line: startLine, sql: s})
		}
	}
	dollarTag := regexp.MustCompile(`^\$[A-Za-z_]*\$`)
	for i := 0; i < len(script); i++ {
		switch c := script[i]; {
		case c == '\n':
			line++
			if strings.TrimSpace(script[start:i]) == "" {
				startLine = line
			}
		case c == '\'' || c == '"':
			end := strings.IndexByte(script[i+1:], c)
			if end < 0 {
				end = len(script) - i - 1
			}
			line += strings.Count(script[i:i+1+end], "\n")
			i += 1 + end
		case c == '-' && strings.HasPrefix(script[i:], "--"):
			end := strings.IndexByte(script[i:], '\n')
			if end < 0 {
				end = len(script) - i
			}
			i += end - 1
		case c == '/' && strings.HasPrefix(script[i:], "/*"):
			end := strings.Index(script[i:], "*/")
			if end < 0 {
				end = len(script) - i - 2
			}
			line += strings.Count(script[i:i+end], "\n")
			i += end + 1
		case c == '$' && dollarTag.MatchString(script[i:]):
			tag := dollarTag.FindString(script[i:])
			end := strings.Index(script[i+len(tag):], tag)
			if end < 0 {
				end = len(script) - i - len(tag)
			}
			line += strings.Count(script[i:i+len(tag)+end], "\n")
			i += len(tag) + end + len(tag) - 1
		case c == ';':
			flush(i + 1)
			start, startLine = i+1, line
		}
	}
	flush(len(script))
	return out
}

// runDoc runs d on conn: a block statement by statement, as psql runs a
// script; a psql -c argument or an inline statement as one query, as psql
// -c sends it. It fails the test naming the file and line of the statement
// that failed, and returns the results of the last statement.
func runDoc(t *testing.T, conn *pgx.Conn, d docSQL) []*pgconn.Result {
	t.Helper()
	stmts := []statement{{line: 1, sql: d.sql}}
	if d.kind == sqlBlock {
		stmts = splitStatements(d.sql)
	}
	var results []*pgconn.Result
	for _, s := range stmts {
		var err error
		results, err = conn.PgConn().Exec(t.Context(), s.sql).ReadAll()
		if err != nil {
			t.Fatalf("%s:%d: %s fails: %v\n%s", d.file, d.line+s.line-1, d.kind, err, s.sql)
		}
	}
	return results
}

// singleValue returns the one value of the one row results hold.
func singleValue(t *testing.T, d docSQL, results []*pgconn.Result) string {
	t.Helper()
	require.Len(t, results, 1, "%s: one result", d)
	require.Len(t, results[0].Rows, 1, "%s: one row", d)
	require.Len(t, results[0].Rows[0], 1, "%s: one column", d)
	return string(results[0].Rows[0][0])
}

// connect opens a connection to dsn, closed at cleanup.
func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// The ids docs/DBA.md's repairs name.
var (
	dbaSegmentID = uuid.MustParse("0b7f4c1e-3f0a-4c55-9d0e-6a3f1c2b9e11")
	dbaOrders    = uuid.MustParse("5b0e8c1a-2f4d-4e7b-9a3c-6d1f0b2e4a87")
)

// addFinished writes a finished segment through m: epochs 0 and 1, so that
// it has epoch rows.
func addFinished(t *testing.T, m rs.RemoteLogMetadataManager, tp rs.TopicIDPartition, id uuid.UUID, start int64) {
	t.Helper()
	segID := rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: id}
	require.NoError(t, m.AddRemoteLogSegmentMetadata(t.Context(), rs.RemoteLogSegmentMetadata{
		SegmentID: segID, StartOffset: start, EndOffset: start + 99, State: rs.CopySegmentStarted,
		SegmentLeaderEpochs: map[rs.LeaderEpoch]int64{0: start, 1: start + 50},
	}))
	require.NoError(t, m.UpdateRemoteLogSegmentMetadata(t.Context(), rs.RemoteLogSegmentMetadataUpdate{SegmentID: segID, State: rs.CopySegmentFinished}))
}

// runDBAQuery: TestDBAQueries runs the Queries section's blocks on a
// seeded database; this one must be one of them.
func runDBAQuery(t *testing.T, d docSQL) {
	var run []string
	for _, q := range dbaQueries(t) {
		run = append(run, q.sql)
	}
	require.Contains(t, run, d.sql, "%s: not among the queries TestDBAQueries runs", d)
}

// runRepairFunctions: the repair functions, called as the guide calls them,
// on the segment and the partition it names.
func runRepairFunctions(t *testing.T, d docSQL) {
	dsn := pgtest.NewDatabase(t)
	m := newManager(t, newPool(t, dsn, 0, false))
	orders0 := rs.TopicIDPartition{TopicID: dbaOrders, Topic: "orders", Partition: 0}
	orders3 := rs.TopicIDPartition{TopicID: dbaOrders, Topic: "orders", Partition: 3}
	addFinished(t, m, orders0, dbaSegmentID, 0)
	addFinished(t, m, orders3, uuid.New(), 0)
	for _, st := range []rs.RemotePartitionDeleteState{rs.DeletePartitionMarked, rs.DeletePartitionStarted} {
		require.NoError(t, m.PutRemotePartitionDeleteMetadata(t.Context(), rs.RemotePartitionDeleteMetadata{TopicIDPartition: orders3, State: st}))
	}

	runDoc(t, connect(t, dsn), d)
	list, err := m.ListRemoteLogSegments(t.Context(), orders0)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, rs.DeleteSegmentStarted, list[0].State, "%s: the segment's repair", d)
	list, err = m.ListRemoteLogSegments(t.Context(), orders3)
	require.NoError(t, err)
	require.Empty(t, list, "%s: the partition's delete finished, its segments are forgotten", d)
}

// runRawDelete: the guide's raw DELETE of a segment while brokers write.
func runRawDelete(t *testing.T, d docSQL) {
	dsn := pgtest.NewDatabase(t)
	pool := newPool(t, dsn, 0, false)
	m := newManager(t, pool)
	orders0 := rs.TopicIDPartition{TopicID: dbaOrders, Topic: "orders", Partition: 0}
	addFinished(t, m, orders0, dbaSegmentID, 0)
	generation := dataGeneration(t, pool)

	runDoc(t, connect(t, dsn), d)
	list, err := m.ListRemoteLogSegments(t.Context(), orders0)
	require.NoError(t, err)
	require.Empty(t, list, "%s: the segment deleted", d)
	var epochRows int
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM rlmm_segment_epochs WHERE segment_id = $1", dbaSegmentID).Scan(&epochRows))
	require.Zero(t, epochRows, "%s: its epoch rows with it", d)
	require.Equal(t, generation+1, dataGeneration(t, pool), "%s: rlmm_resync() ran", d)
}

// dataGeneration reads the data's generation (0: never bumped).
func dataGeneration(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	var g int64
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT coalesce(max(generation), 0) FROM rlmm_data_generation").Scan(&g))
	return g
}

// runPurge: one round of the purge, which deletes a segment forgotten
// longer ago than the round's age.
func runPurge(t *testing.T, d docSQL) {
	dsn := pgtest.NewDatabase(t)
	pool := newPool(t, dsn, 0, false)
	m := newManager(t, pool)
	tp := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "orders", Partition: 0}
	old, recent := uuid.New(), uuid.New()
	for i, id := range []uuid.UUID{old, recent} {
		addFinished(t, m, tp, id, int64(i)*100)
		for _, st := range []rs.RemoteLogSegmentState{rs.DeleteSegmentStarted, rs.DeleteSegmentFinished} {
			require.NoError(t, m.UpdateRemoteLogSegmentMetadata(t.Context(), rs.RemoteLogSegmentMetadataUpdate{
				SegmentID: rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: id}, State: st}))
		}
	}
	// Forgotten 40 days ago (a timestamp, not a state: the guards let it by).
	_, err := pool.Exec(t.Context(), "UPDATE rlmm_segments SET updated_at = now() - interval '40 days' WHERE segment_id = $1", old)
	require.NoError(t, err)

	require.Equal(t, "1", singleValue(t, d, runDoc(t, connect(t, dsn), d)), "%s: segments deleted", d)
	var left []uuid.UUID
	rows, err := pool.Query(t.Context(), "SELECT segment_id FROM rlmm_segments")
	require.NoError(t, err)
	left, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{recent}, left, "%s: the segment forgotten 40 days ago purged, the other kept", d)
}

// runResync: rlmm_resync() bumps the data's generation.
func runResync(t *testing.T, d docSQL) {
	dsn := pgtest.NewDatabase(t)
	pool := newPool(t, dsn, 0, false)
	before := dataGeneration(t, pool)
	require.Equal(t, fmt.Sprint(before+1), singleValue(t, d, runDoc(t, connect(t, dsn), d)), "%s: the new generation", d)
	require.Equal(t, before+1, dataGeneration(t, pool))
}

// runStuck: the stuck-work query finds the work the seed left in flight.
func runStuck(t *testing.T, d docSQL) {
	pool := pgtest.NewPool(t)
	sampledata.Seed(t, pool)
	results := runDoc(t, connect(t, pool.Config().ConnString()), d)
	require.Len(t, results, 1)
	require.NotEmpty(t, results[0].Rows, "%s: the seed's stuck upload and deletion, aged two hours", d)
}

// runCreateSchemas: the DBA's schemas, one per cluster.
func runCreateSchemas(t *testing.T, d docSQL) {
	dsn := pgtest.NewEmptyDatabase(t)
	conn := connect(t, dsn)
	runDoc(t, conn, d)
	var schemas []string
	rows, err := conn.Query(t.Context(), "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'cluster\\_%' ORDER BY 1")
	require.NoError(t, err)
	schemas, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"cluster_a", "cluster_b"}, schemas, d.String())
}

// runCompatDeclaration: the row the guide has a DBA add by hand after
// applying migration 20 with their own tooling, which records no
// declaration: without it the code of schema 19 refuses the database, with
// it the code starts.
func runCompatDeclaration(t *testing.T, d docSQL) {
	require.EqualValues(t, 19, rs.SchemaVersion, "%s names migration 20 after schema 19: update the guide's example", d)
	dsn := pgtest.NewDatabase(t)
	pool := newPool(t, dsn, 0, false)
	// What the goose CLI records when it applies migration 20.
	_, err := pool.Exec(t.Context(), "INSERT INTO "+pgx.Identifier{migrations.VersionTable}.Sanitize()+" (version_id, is_applied) VALUES (20, true)")
	require.NoError(t, err)
	_, err = rs.NewPgManager(t.Context(), pool)
	require.ErrorIs(t, err, rs.ErrSchemaMismatch, "a migration with no declaration")

	runDoc(t, connect(t, dsn), d)
	m, err := rs.NewPgManager(t.Context(), pool)
	require.NoError(t, err, "%s: the declaration added by hand", d)
	m.Close()
}

// runBrokerGrants: the GRANTs of a broker's role, then a broker logged in
// as that role doing its work.
func runBrokerGrants(t *testing.T, d docSQL) {
	ctx := t.Context()
	// A database with the doc's schema, cluster_a, migrated by the
	// server's superuser (the schema's owner).
	dsn := pgtest.NewEmptyDatabase(t)
	admin := connect(t, dsn)
	_, err := admin.Exec(ctx, "CREATE SCHEMA cluster_a")
	require.NoError(t, err)
	inSchema := func(cfg *pgxpool.Config) *pgxpool.Pool {
		cfg.ConnConfig.RuntimeParams["search_path"] = "cluster_a"
		rs.ConfigurePool(cfg)
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		return pool
	}
	ownerCfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(t, err)
	require.NoError(t, rs.Migrate(ctx, inSchema(ownerCfg)))

	// The role, of this run's own name: roles belong to the whole server.
	var random [4]byte
	_, _ = rand.Read(random[:])
	role := "t" + hex.EncodeToString(random[:]) + "_app"
	_, err = admin.Exec(ctx, "CREATE ROLE "+role+" LOGIN")
	require.NoError(t, err)
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), dsn)
		require.NoError(t, err)
		defer conn.Close(context.Background())
		_, err = conn.Exec(context.Background(), "DROP OWNED BY "+role+"; DROP ROLE "+role)
		require.NoError(t, err)
	})
	d.sql = regexp.MustCompile(`\brlmm_app\b`).ReplaceAllString(d.sql, role)
	runDoc(t, admin, d)

	// A broker logged in as the role.
	brokerCfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(t, err)
	brokerCfg.ConnConfig.User = role
	broker := inSchema(brokerCfg)
	fail := func(step string, err error) {
		t.Helper()
		require.NoError(t, err, "a broker given the GRANTs of %s: %s", d, step)
	}
	migrateCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	fail("Migrate, which only reads an up-to-date schema", rs.Migrate(migrateCtx, broker))
	m, err := rs.NewPgManager(ctx, broker)
	fail("NewPgManager", err)
	defer m.Close()
	tp := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "orders", Partition: 0}
	id := rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.New()}
	fail("add", m.AddRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadata{
		SegmentID: id, EndOffset: 99, State: rs.CopySegmentStarted, SegmentLeaderEpochs: map[rs.LeaderEpoch]int64{0: 0, 1: 50},
	}))
	fail("update", m.UpdateRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadataUpdate{SegmentID: id, State: rs.CopySegmentFinished}))
	seg, found, err := m.RemoteLogSegmentMetadata(ctx, tp, 1, 70)
	fail("lookup", err)
	require.True(t, found, "%s: the broker's lookup", d)
	require.Equal(t, id, seg.SegmentID)
	for _, st := range []rs.RemotePartitionDeleteState{rs.DeletePartitionMarked, rs.DeletePartitionStarted, rs.DeletePartitionFinished} {
		fail("partition delete "+st.String(), m.PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{TopicIDPartition: tp, State: st}))
	}
	purged, err := m.PurgeForgotten(ctx, 0)
	fail("purge", err)
	require.EqualValues(t, 1, purged, "%s: the broker's purge of the deleted partition's segment", d)
}

// runbookServer is the throwaway server of docs/RUNBOOK.md's blocks, which
// change server-wide settings; started on first use, stopped when the
// test binary's tests are done.
var runbookServer struct {
	mu      sync.Mutex // held by one block at a time: they change the same settings
	cluster *pgcluster.Cluster
}

// runbookConn returns a connection to the runbook's server, starting it
// on first use, and holds the server until the test ends.
func runbookConn(t *testing.T) *pgx.Conn {
	t.Helper()
	runbookServer.mu.Lock()
	t.Cleanup(runbookServer.mu.Unlock)
	if runbookServer.cluster == nil {
		_, err := pgcluster.FindBinDir()
		require.NoError(t, err, "the runbook's server settings run on a server of their own, from the local PostgreSQL server binaries")
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		defer cancel()
		c, err := pgcluster.Start(ctx, pgcluster.Options{})
		require.NoError(t, err, "the runbook's server")
		runbookServer.cluster = c
	}
	return connect(t, runbookServer.cluster.URL("postgres"))
}

// stopRunbookServer stops the runbook's server, if it started.
func stopRunbookServer() {
	runbookServer.mu.Lock()
	defer runbookServer.mu.Unlock()
	if runbookServer.cluster != nil {
		_ = runbookServer.cluster.Stop()
		runbookServer.cluster = nil
	}
}

// runRunbookSetting: an ALTER SYSTEM block of the runbook sets
// synchronous_standby_names to want. The server starts from the other
// value, and the block's own setting is undone after.
func runRunbookSetting(want string) func(t *testing.T, d docSQL) {
	return func(t *testing.T, d docSQL) {
		conn := runbookConn(t)
		setting := func() string {
			var v string
			require.NoError(t, conn.QueryRow(t.Context(), "SHOW synchronous_standby_names").Scan(&v))
			return v
		}
		other := "node9"
		if want != "" {
			other = ""
		}
		_, err := conn.Exec(t.Context(), "ALTER SYSTEM SET synchronous_standby_names = "+quoteLiteral(other))
		require.NoError(t, err)
		_, err = conn.Exec(t.Context(), "SELECT pg_reload_conf()")
		require.NoError(t, err)
		testwait.Until(t, "synchronous_standby_names = "+quoteLiteral(other), func() bool { return setting() == other })
		t.Cleanup(func() {
			ctx := context.Background()
			_, _ = conn.Exec(ctx, "ALTER SYSTEM RESET synchronous_standby_names")
			_, _ = conn.Exec(ctx, "SELECT pg_reload_conf()")
		})

		runDoc(t, conn, d)
		testwait.Until(t, fmt.Sprintf("%s: synchronous_standby_names = %s", d, quoteLiteral(want)), func() bool { return setting() == want })
	}
}

// runRunbookQuery: a statement of the runbook, on its server.
func runRunbookQuery(t *testing.T, d docSQL) {
	runDoc(t, runbookConn(t), d)
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
