package remotestorage_test

// Statements of the docs about the code, checked against the code: the
// releases docs/MIGRATIONS.md cites, and the from-states the sequence
// diagram of docs/ARCHITECTURE.md gives. (The docs' SQL runs in
// docs_sql_test.go, the README's quick start in example_quickstart_test.go.)

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/migrations"
)

// TestMigrationsGuideCitesTheReleases: the table of releases in
// docs/MIGRATIONS.md has a row per release of migrations.Releases, with its
// schema and digest.
func TestMigrationsGuideCitesTheReleases(t *testing.T) {
	t.Parallel()
	guide, err := os.ReadFile("docs/MIGRATIONS.md")
	require.NoError(t, err)
	row := regexp.MustCompile("(?m)^\\| (\\d+) \\| (\\d+) \\| `([0-9a-f]{64})` \\|")
	var cited []migrations.Release
	for _, m := range row.FindAllStringSubmatch(string(guide), -1) {
		number, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		schema, err := strconv.ParseInt(m[2], 10, 64)
		require.NoError(t, err)
		cited = append(cited, migrations.Release{Number: number, Schema: schema, Digest: m[3]})
	}
	require.Equal(t, migrations.Releases, cited, "docs/MIGRATIONS.md's table of releases (release | schema | digest | …) and migrations.Releases")
}

// TestArchitectureDiagramFromStates: the from-states the update's sequence
// diagram in docs/ARCHITECTURE.md gives for a state are those
// statemachine.go allows (in the diagram's short names: COPY_STARTED for
// COPY_SEGMENT_STARTED).
func TestArchitectureDiagramFromStates(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("docs/ARCHITECTURE.md")
	require.NoError(t, err)
	m := regexp.MustCompile(`AllowedSegmentFromStates\(u\.State\)\n\s*V-->>M: e\.g\. \[([A-Z_, ]+)\] for ([A-Z_]+)`).FindStringSubmatch(string(doc))
	require.NotNil(t, m, "docs/ARCHITECTURE.md: the diagram's answer of AllowedSegmentFromStates (V-->>M: e.g. [...] for STATE)")
	short := func(s rs.RemoteLogSegmentState) string { return strings.Replace(s.String(), "_SEGMENT_", "_", 1) }
	to, found := rs.RemoteLogSegmentState(0), false
	for s := rs.CopySegmentStarted; s <= rs.DeleteSegmentFinished; s++ {
		if short(s) == m[2] {
			to, found = s, true
		}
	}
	require.True(t, found, "docs/ARCHITECTURE.md names %s, which is no state", m[2])
	var want []string
	for _, s := range rs.AllowedSegmentFromStates(to) {
		want = append(want, short(s))
	}
	require.Equal(t, strings.Join(want, ", "), m[1], "docs/ARCHITECTURE.md: the states from which a segment may reach %s", m[2])
}
