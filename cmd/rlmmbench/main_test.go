package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The benchmark, scaled down to a few thousand segments and milliseconds
// per measurement, runs against the test server and writes its report: a
// schema change that the loader, the baselines' checks or the report do not
// follow fails here, not in the next `make bench`. The walk phase runs this
// binary again as a child, so it is left to `make bench`.
func TestBenchRunsScaledDown(t *testing.T) {
	t.Parallel()
	report := filepath.Join(t.TempDir(), "report.md")
	cfg, err := parseFlags([]string{
		"-database-url", pgtest.Server(t).AdminURL,
		"-segments", "4000", "-small", "2000", "-clients", "1,2",
		"-duration", "60ms", "-rounds", "1", "-warmup", "20ms",
		"-memory-duration", "20ms", "-memory-partitions", "2",
		"-open-loop-duration", "200ms", "-skip", "walk",
		"-out", report,
	})
	require.NoError(t, err)
	require.NoError(t, withServer(t.Context(), cfg, runBench))
	b, err := os.ReadFile(report)
	require.NoError(t, err)
	require.Contains(t, string(b), "lookup")
	require.Contains(t, string(b), "AddRemoteLogSegmentMetadata")
	// Every operation got its answers right, the proposals' included.
	var failed []string
	for line := range strings.Lines(string(b)) {
		if strings.Contains(line, "**errors:") || strings.Contains(line, "| error:") {
			failed = append(failed, line)
		}
	}
	require.Empty(t, failed, "the report's operations that failed")
}
