package main

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
)

// TestOneClusterOfSeveral: rlmmctl works on one cluster's schema of a
// database that holds several, named by the search_path in the URL, or by
// PGOPTIONS as psql would be.
func TestOneClusterOfSeveral(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.NewEmptyDatabase(t)
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE SCHEMA cluster_a; CREATE SCHEMA cluster_b")
	require.NoError(t, err)

	inSchema := func(schema string) string {
		u, err := url.Parse(dsn)
		require.NoError(t, err)
		// libpq's spelling, which pgx honours too; pgx decodes %20, not +.
		if u.RawQuery != "" {
			u.RawQuery += "&"
		}
		u.RawQuery += "options=" + strings.ReplaceAll(url.QueryEscape("-c search_path="+schema), "+", "%20")
		return u.String()
	}
	dsnA, dsnB := inSchema("cluster_a"), inSchema("cluster_b")
	require.Contains(t, ok(t, dsnA, "migrate", "up"), "migrated the schema")
	require.Contains(t, ok(t, dsnB, "migrate", "up"), "migrated the schema")

	// The same topic in both clusters, with different segments.
	tp := remotestorage.TopicIDPartition{TopicID: uuid.New(), Topic: "orders", Partition: 0}
	ids := map[string]uuid.UUID{}
	for _, schemaDSN := range []string{dsnA, dsnB} {
		_, m, closeManager := testManager(t, schemaDSN)
		id := remotestorage.RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.New()}
		require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, remotestorage.RemoteLogSegmentMetadata{
			SegmentID: id, EndOffset: 99, State: remotestorage.CopySegmentStarted,
			SegmentLeaderEpochs: map[remotestorage.LeaderEpoch]int64{0: 0},
		}))
		ids[schemaDSN] = id.ID
		closeManager()
	}

	listA := ok(t, dsnA, "segments", "list", "--topic", "orders", "--partition", "0")
	require.Contains(t, listA, ids[dsnA].String())
	require.NotContains(t, listA, ids[dsnB].String())

	// A repair in a: b's segment is neither found nor touched.
	require.Contains(t, ok(t, dsnA, "segments", "set-state", ids[dsnA].String(), "COPY_SEGMENT_FINISHED"), "-> COPY_SEGMENT_FINISHED")
	r := rlmmctl(t, nil, "--database-url", dsnA, "segments", "set-state", ids[dsnB].String(), "COPY_SEGMENT_FINISHED")
	require.Equal(t, exitNotFound, r.code, r.output())
	require.Contains(t, ok(t, dsnA, "lookup", "--topic", "orders", "--partition", "0", "--epoch", "0", "--offset", "5"), ids[dsnA].String())
	r = rlmmctl(t, nil, "--database-url", dsnB, "lookup", "--topic", "orders", "--partition", "0", "--epoch", "0", "--offset", "5")
	require.Equal(t, exitNotFound, r.code, r.output())

	// The PG* variables with PGOPTIONS, as psql takes them.
	env := append(pgEnv(t, dsn), "PGOPTIONS=-c search_path=cluster_b")
	r = rlmmctl(t, env, "partitions", "list")
	require.Equal(t, 0, r.code, r.output())
	require.Regexp(t, `(?m)^orders\s+0\s+\S+\s+\S+\s+1\s+0\s`, r.stdout, "b's segment is still copying")
	r = rlmmctl(t, env, "migrate", "status")
	require.Equal(t, 0, r.code, r.output())
	require.Contains(t, r.stdout, "up to date")
}
