package main

import (
	"fmt"
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgcluster"
	"github.com/krabka/remotestorage/internal/pgtest"
)

// demoHeadings are the sections of the demo's report.
var demoHeadings = []string{
	"\nDatabase\n", "\nSimulation\n", "\nTopics (", "\nRefused writes", "\nLookups (", "\nHighest offsets per epoch", "\nOpen the data\n",
}

func TestDemoAgainstDatabaseURL(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewEmptyDatabase(t) // the demo migrates it
	r := rlmmctl(t, []string{"DATABASE_URL=" + dsn}, "demo", "--brokers", "2", "--topics", "2", "--partitions", "2", "--segments", "8")
	require.Equal(t, 0, r.code, r.output())
	for _, h := range demoHeadings {
		require.Contains(t, r.stdout, h)
	}
	require.Contains(t, r.stdout, fmt.Sprintf("migrated to schema version %d", remotestorage.SchemaVersion))
	require.Regexp(t, `(?m)^  HIT  `, r.stdout)
	require.Regexp(t, `(?m)^  MISS  .* → no segment: .*deleted`, r.stdout)
	require.Contains(t, r.stdout, "→ refused: remotestorage: invalid segment state transition")
	require.Contains(t, r.stdout, "→ refused: remotestorage: invalid add")
	require.Regexp(t, `(?m)^  demo-payments\s+2\s+0\s+0\s+0\s+16\s+0 B\s+DELETE_PARTITION_FINISHED$`, r.stdout)
	require.Regexp(t, `(?m)^  psql `, r.stdout)
	require.Empty(t, r.stderr)

	// The data is there for the other commands.
	require.Contains(t, ok(t, dsn, "partitions", "list", "--topic", "demo-orders"), "demo-orders")
}

func TestDemoThrowawayCluster(t *testing.T) {
	t.Parallel()
	_, err := pgcluster.FindBinDir()
	require.NoError(t, err, "the demo needs the PostgreSQL server binaries for a throwaway cluster")
	r := rlmmctl(t, nil, "demo", "--brokers", "2", "--topics", "2", "--partitions", "1", "--segments", "4")
	require.Equal(t, 0, r.code, r.output())
	for _, h := range demoHeadings {
		require.Contains(t, r.stdout, h)
	}
	require.Contains(t, r.stdout, "starting a throwaway PostgreSQL cluster")
	require.Contains(t, r.stdout, "stopped and deleted")
	m := regexp.MustCompile(`throwaway cluster in (\S+),`).FindStringSubmatch(r.stdout)
	require.NotNil(t, m, r.stdout)
	_, err = os.Stat(m[1])
	require.ErrorIs(t, err, os.ErrNotExist, "the cluster's directory is removed")
}
