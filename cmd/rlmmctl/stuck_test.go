package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage/internal/pgtest"
)

func TestStuck(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	d := seedInspectData(t, dsn) // s[4]: orders-0, COPY_SEGMENT_STARTED by broker 1

	r := rlmmctl(t, nil, "--database-url", dsn, "stuck", "--older-than", "1h")
	require.Equal(t, 0, r.code, r.output())
	require.Contains(t, r.stdout, "nothing stuck for longer than 1h0m0s")

	pool, err := pgxpool.New(context.Background(), dsn)
	require.NoError(t, err)
	defer pool.Close()
	_, err = pool.Exec(t.Context(), `UPDATE rlmm_segments SET updated_at = now() - interval '2 hours' WHERE segment_id = $1`, d.s[4])
	require.NoError(t, err)

	r = rlmmctl(t, nil, "--database-url", dsn, "stuck", "--older-than", "1h")
	require.Equal(t, exitStuck, r.code, r.output())
	require.Empty(t, r.stderr, "the answer is on stdout")
	require.Contains(t, r.stdout, "1 segments and 0 partitions stuck for longer than 1h0m0s")
	require.Regexp(t, `segment\s+orders\s+0\s+COPY_SEGMENT_STARTED\s+1\s+2h0m\d+s\s.*`+d.s[4].String()+`\s+4000-4999\s+4\.9 KiB`, r.stdout)

	for _, flag := range []string{"--format", "-o"} {
		r = rlmmctl(t, nil, "--database-url", dsn, "stuck", "--older-than", "90m", flag, "json")
		require.Equal(t, exitStuck, r.code, r.output())
		var out stuckOutput
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r.stdout)
		require.Equal(t, 1, out.Segments)
		require.Len(t, out.Items, 1)
		it := out.Items[0]
		require.Equal(t, "segment", it.Kind)
		require.Equal(t, d.s[4], *it.SegmentID)
		require.EqualValues(t, 1, it.BrokerID)
		require.EqualValues(t, 4000, *it.StartOffset)
		require.InDelta(t, 7200, it.AgeSeconds, 120)
		require.Equal(t, 5400.0, out.OlderThanSeconds)
	}

	// 0: everything in flight, and nothing of the deleted partition "gone".
	r = rlmmctl(t, nil, "--database-url", dsn, "stuck", "--older-than", "0", "-o", "json")
	require.Equal(t, exitStuck, r.code, r.output())
	var out stuckOutput
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	require.Len(t, out.Items, 1)

	r = rlmmctl(t, nil, "--database-url", dsn, "stuck", "--older-than", "3h", "--format", "json")
	require.Equal(t, 0, r.code, r.output())
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	require.Empty(t, out.Items)

	for _, bad := range [][]string{{"--older-than", "-1h"}, {"--older-than", "soon"}, {"--format", "yaml"}} {
		r = rlmmctl(t, nil, append([]string{"--database-url", dsn, "stuck"}, bad...)...)
		require.Equal(t, exitUsage, r.code, "%v: %s", bad, r.output())
	}
}
