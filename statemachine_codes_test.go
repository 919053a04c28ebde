package remotestorage_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
)

// stateCode matches a state code written bare in SQL (state = 1,
// delete_state = 2, state IN (0, 1, 2)) and the comment that must follow it.
var stateCode = regexp.MustCompile(`\b(delete_state|state)(?:::integer)?\s*(=\s*\d+|IN\s*\(\s*\d+(?:\s*,\s*\d+)*\s*\))(\s*/\*\s*([^*]*?)\s*\*/)?`)

// TestStateCodesInSQLAreNamed: statemachine.go's types are the one source
// of the state codes. Every code the queries write bare (indexes' partial
// predicates need literals, not functions) is followed by a comment naming
// its states, and the names must be what the Go types call those codes.
func TestStateCodesInSQLAreNamed(t *testing.T) {
	files, err := filepath.Glob("queries/*.sql")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	checked := 0
	for _, file := range files {
		text, err := os.ReadFile(file)
		require.NoError(t, err)
		for i, line := range strings.Split(string(text), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "--") {
				continue // prose
			}
			for _, m := range stateCode.FindAllStringSubmatch(line, -1) {
				var want []string
				for _, code := range regexp.MustCompile(`\d+`).FindAllString(m[2], -1) {
					n, err := strconv.Atoi(code)
					require.NoError(t, err)
					if m[1] == "delete_state" {
						want = append(want, rs.RemotePartitionDeleteState(n).String())
					} else {
						want = append(want, rs.RemoteLogSegmentState(n).String())
					}
				}
				require.NotEmpty(t, m[3], "%s:%d: %q: name the states in a comment: /* %s */", file, i+1, m[0], strings.Join(want, ", "))
				require.Equal(t, strings.Join(want, ", "), m[4], "%s:%d: %q", file, i+1, m[0])
				checked++
			}
		}
	}
	require.Greater(t, checked, 20, "the pattern finds the codes")
}
