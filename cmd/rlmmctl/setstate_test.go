package main

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage"
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

// TestGuardPointsAtTheRepair: the database refuses a DBA's raw UPDATE of a
// segment's state, of its epoch rows' state or of a partition's delete
// state (SQLSTATE 23514, constraint <table>_raw_state_change) and changes
// nothing; the refusal names the repair function to call instead, with the
// segment or partition filled in. The rlmmctl command whose help names that
// function (segments set-state, partitions set-delete-state), given what
// the refusal names, does the repair with its bookkeeping, and so does the
// refusal's own call, run as it is written with a state filled in.
func TestGuardPointsAtTheRepair(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	d := seedInspectData(t, dsn)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)

	// The call a refusal names: "call rlmm_set_segment_state('<id>', <state>)".
	call := regexp.MustCompile(`call ((rlmm_\w+)\(([^)]*), <state>\))`)
	type refusal struct {
		call     string   // the function call as the message spells it
		function string   // the function it calls
		args     []string // its arguments before the state, unquoted
	}
	refused := func(table string, sql string, args ...any) refusal {
		t.Helper()
		_, err := conn.Exec(ctx, sql, args...)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, sql)
		require.Equal(t, pgerrcode.CheckViolation, pgErr.Code, "%s: %v", sql, err)
		require.Equal(t, table+"_raw_state_change", pgErr.ConstraintName, sql)
		m := call.FindStringSubmatch(pgErr.Message)
		require.NotNil(t, m, "no repair function call in %q", pgErr.Message)
		r := refusal{call: m[1], function: m[2]}
		for _, a := range strings.Split(m[3], ",") {
			r.args = append(r.args, strings.Trim(strings.TrimSpace(a), "'"))
		}
		return r
	}
	// commandFor is the rlmmctl command whose help names the function.
	commandFor := func(function string) []string {
		t.Helper()
		for _, c := range [][]string{{"segments", "set-state"}, {"partitions", "set-delete-state"}} {
			help := runInProcess(append(c, "--help")...)
			require.Equal(t, 0, help.code, help.output())
			if strings.Contains(strings.Join(strings.Fields(help.stdout), " "), "repair function "+function+" ") {
				return c
			}
		}
		require.Failf(t, "no rlmmctl command calls the repair function", "%s", function)
		return nil
	}
	segmentState := func(id uuid.UUID) (segment int16, epochRows []int16) {
		t.Helper()
		require.NoError(t, conn.QueryRow(ctx, `SELECT s.state, array(SELECT e.state FROM rlmm_segment_epochs e WHERE e.segment_id = s.segment_id)
			FROM rlmm_segments s WHERE s.segment_id = $1`, id).Scan(&segment, &epochRows))
		return segment, epochRows
	}

	// span, a segment of two leader epochs (so with epoch rows), is in
	// COPY_SEGMENT_STARTED, which cannot jump to DELETE_SEGMENT_FINISHED; a
	// raw UPDATE could not move its epoch rows with it either.
	_, m, closeManager := testManager(t, dsn)
	span := remotestorage.RemoteLogSegmentID{TopicIDPartition: d.orders, ID: uuid.New()}
	require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, remotestorage.RemoteLogSegmentMetadata{
		SegmentID: span, StartOffset: 7000, EndOffset: 7999, State: remotestorage.CopySegmentStarted,
		SegmentLeaderEpochs: map[remotestorage.LeaderEpoch]int64{1: 7000, 2: 7500},
	}))
	closeManager()
	for _, r := range []refusal{
		refused("rlmm_segments", "UPDATE rlmm_segments SET state = 3 WHERE segment_id = $1", span.ID),
		refused("rlmm_segment_epochs", "UPDATE rlmm_segment_epochs SET state = 1 WHERE segment_id = $1", span.ID),
	} {
		require.Equal(t, "rlmm_set_segment_state", r.function)
		require.Equal(t, []string{span.ID.String()}, r.args)
	}
	state, epochRows := segmentState(span.ID)
	require.EqualValues(t, remotestorage.CopySegmentStarted, state, "a refused UPDATE changes nothing")
	require.Equal(t, []int16{int16(remotestorage.CopySegmentStarted), int16(remotestorage.CopySegmentStarted)}, epochRows)
	repair := append(commandFor("rlmm_set_segment_state"), span.ID.String())
	require.Contains(t, ok(t, dsn, append(repair, "DELETE_SEGMENT_STARTED")...), "COPY_SEGMENT_STARTED -> DELETE_SEGMENT_STARTED")
	require.Contains(t, ok(t, dsn, append(repair, "DELETE_SEGMENT_FINISHED")...), "DELETE_SEGMENT_STARTED -> DELETE_SEGMENT_FINISHED")
	state, epochRows = segmentState(span.ID)
	require.EqualValues(t, remotestorage.DeleteSegmentFinished, state)
	require.Equal(t, []int16{int16(remotestorage.DeleteSegmentFinished), int16(remotestorage.DeleteSegmentFinished)}, epochRows, "the repair moves the epoch rows with the segment")

	// A partition cannot skip DELETE_PARTITION_MARKED.
	r := refused("rlmm_partitions", "UPDATE rlmm_partitions SET delete_state = 1, delete_broker_id = 0, delete_event_timestamp_ms = 0 WHERE topic_id = $1", d.orders.TopicID)
	require.Equal(t, "rlmm_set_partition_delete_state", r.function)
	require.Equal(t, []string{d.orders.TopicID.String(), "0"}, r.args)
	deleteState := func() *int16 {
		t.Helper()
		var st *int16
		require.NoError(t, conn.QueryRow(ctx, `SELECT delete_state FROM rlmm_partitions WHERE topic_id = $1 AND partition = 0`, d.orders.TopicID).Scan(&st))
		return st
	}
	require.Nil(t, deleteState(), "a refused UPDATE changes nothing")
	repair = append(commandFor("rlmm_set_partition_delete_state"), "--topic-id", r.args[0], "--partition", r.args[1])
	require.Contains(t, ok(t, dsn, append(repair, "DELETE_PARTITION_MARKED")...), "NONE -> DELETE_PARTITION_MARKED")
	// The call as the refusal spells it, in psql, with the state filled in.
	_, err = conn.Exec(ctx, "SELECT "+strings.Replace(r.call, "<state>", "'DELETE_PARTITION_STARTED'", 1))
	require.NoError(t, err, r.call)
	require.NotNil(t, deleteState())
	require.EqualValues(t, remotestorage.DeletePartitionStarted, *deleteState())
}
