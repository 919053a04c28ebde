package main

import (
	"context"
	"regexp"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage/internal/pgtest"
)

func TestSegmentsSetState(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	d := seedInspectData(t, dsn)
	setState := func(args ...string) result {
		return rlmmctl(t, nil, append([]string{"--database-url", dsn, "segments", "set-state"}, args...)...)
	}
	lookup := func() result {
		return rlmmctl(t, nil, "--database-url", dsn, "lookup", "--topic", "orders", "--partition", "0", "--epoch", "1", "--offset", "4500")
	}

	// s[4] is still copying: lookups miss it until its copy is finished.
	require.Equal(t, exitNotFound, lookup().code)
	r := setState(d.s[4].String(), "copy_finished", "--broker-id", "9")
	require.Equal(t, 0, r.code, r.output())
	require.Contains(t, r.stdout, "segment "+d.s[4].String()+" of orders-0")
	require.Contains(t, r.stdout, "COPY_SEGMENT_STARTED -> COPY_SEGMENT_FINISHED")
	hit := lookup()
	require.Equal(t, 0, hit.code, hit.output())
	require.Contains(t, hit.stdout, d.s[4].String())
	require.Regexp(t, `broker id:\s+9`, hit.stdout)

	r = setState(d.s[4].String(), "COPY_SEGMENT_FINISHED")
	require.Equal(t, 0, r.code, r.output())
	require.Contains(t, r.stdout, "already COPY_SEGMENT_FINISHED")

	// Refused by the state machine: nothing changes, the message says
	// where the segment may go.
	r = setState(d.s[1].String(), "COPY_SEGMENT_STARTED")
	require.Equal(t, exitFailure, r.code, r.output())
	require.Contains(t, r.stderr, "invalid segment state transition")
	require.Contains(t, r.stderr, "from COPY_SEGMENT_FINISHED a segment may only move to DELETE_SEGMENT_STARTED")
	r = setState(d.s[0].String(), "DELETE_SEGMENT_STARTED")
	require.Equal(t, exitFailure, r.code, r.output())
	require.Contains(t, r.stderr, "a segment in DELETE_SEGMENT_FINISHED never changes state again")

	// Not found: no such id, or forgotten with its deleted partition.
	r = setState(uuid.NewString(), "DELETE_SEGMENT_STARTED")
	require.Equal(t, exitNotFound, r.code, r.output())
	r = setState(d.s[6].String(), "DELETE_SEGMENT_STARTED")
	require.Equal(t, exitNotFound, r.code, r.output())
	require.Contains(t, r.stderr, "forgotten")

	for _, args := range [][]string{{"not-a-uuid", "DELETE_SEGMENT_STARTED"}, {d.s[1].String(), "BOGUS"}, {d.s[1].String()}} {
		r = setState(args...)
		require.Equal(t, exitUsage, r.code, r.output())
	}
}

func TestPartitionsSetDeleteState(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	d := seedInspectData(t, dsn)
	set := func(state string) result {
		return rlmmctl(t, nil, "--database-url", dsn, "partitions", "set-delete-state",
			"--topic-id", kafkaTopicID(d.orders.TopicID), "--partition", "0", state)
	}

	r := set("FINISHED")
	require.Equal(t, exitFailure, r.code, r.output())
	require.Contains(t, r.stderr, "from NONE a partition may only move to DELETE_PARTITION_MARKED")
	r = set("marked")
	require.Equal(t, 0, r.code, r.output())
	require.Contains(t, r.stdout, "delete state NONE -> DELETE_PARTITION_MARKED")
	require.Regexp(t, `(?m)^orders\s.*\sDELETE_PARTITION_MARKED\s`, ok(t, dsn, "partitions", "list"))
	r = set("DELETE_PARTITION_MARKED")
	require.Equal(t, 0, r.code, r.output())
	require.Contains(t, r.stdout, "already DELETE_PARTITION_MARKED")

	r = rlmmctl(t, nil, "--database-url", dsn, "partitions", "set-delete-state", "--topic", "nosuch", "--partition", "0", "MARKED")
	require.Equal(t, exitNotFound, r.code, r.output())
	r = rlmmctl(t, nil, "--database-url", dsn, "partitions", "set-delete-state", "--topic", "orders", "--partition", "7", "MARKED")
	require.Equal(t, exitNotFound, r.code, r.output())
	r = set("NONE")
	require.Equal(t, exitUsage, r.code, r.output())
}

// TestGuardPointsAtTheRepair: the database refuses a DBA's forbidden UPDATE
// with a message that names the rlmmctl command to use instead, and that
// command, completed with a state, does the repair.
func TestGuardPointsAtTheRepair(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	d := seedInspectData(t, dsn)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	command := regexp.MustCompile(`rlmmctl ([^<]+) <STATE>`)
	suggested := func(err error) []string {
		t.Helper()
		require.Error(t, err)
		m := command.FindStringSubmatch(err.Error())
		require.NotNil(t, m, "no command in %q", err)
		return regexp.MustCompile(`\s+`).Split(m[1], -1)
	}

	// COPY_SEGMENT_STARTED cannot jump to DELETE_SEGMENT_FINISHED.
	_, err = conn.Exec(ctx, "UPDATE rlmm_segments SET state = 3 WHERE segment_id = $1", d.s[4])
	args := suggested(err)
	require.Contains(t, ok(t, dsn, append(args, "DELETE_SEGMENT_STARTED")...), "COPY_SEGMENT_STARTED -> DELETE_SEGMENT_STARTED")
	require.Contains(t, ok(t, dsn, append(args, "DELETE_SEGMENT_FINISHED")...), "DELETE_SEGMENT_STARTED -> DELETE_SEGMENT_FINISHED")

	// A partition cannot skip DELETE_PARTITION_MARKED.
	_, err = conn.Exec(ctx, "UPDATE rlmm_partitions SET delete_state = 1, delete_broker_id = 0, delete_event_timestamp_ms = 0 WHERE topic_id = $1", d.orders.TopicID)
	args = suggested(err)
	require.Contains(t, ok(t, dsn, append(args, "DELETE_PARTITION_MARKED")...), "NONE -> DELETE_PARTITION_MARKED")
}
