package main

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage/cmd/rlmmctl/internal/ctldb"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/plancheck"
)

// The plan test of rlmmctl's own statements (queries/), as pgmanager_plan_test.go at
// the module root checks the library's: under every statistics state
// (plancheck.States), at two sizes 100× apart. What grows is the rest of
// the store (other topics); the topic the commands look at stays the same.
// A statement about one topic, partition or segment must cost the same at
// both sizes (plancheck.Allowed); one that reads every row by design
// (partitions list without a filter, migrate down's count of the rows a
// rollback would drop) may grow with the tables, but no faster than they
// do. A statement about one topic may also read rlmm_partitions once, by
// any path (its heap and indexes): with statistics taken when the store
// held three topics, the planner believes a topic holds a third of the
// partitions and walks the table or its topic index whole (8,000
// partitions: about 300 buffers); it must never read rlmm_segments beyond
// that topic's ranges.
//
// Custom plans only, unlike the library's test: rlmmctl is a process per
// command that runs each statement once or twice on a connection, and
// PostgreSQL plans the first five executions of a prepared statement for
// their arguments; the generic plan, which a broker's long-lived
// connections reach, never runs here.

// The store of one measurement: the topic "plans" has planPartitions
// partitions of planSegments segments, partition 0 with planForgotten of
// them in DELETE_SEGMENT_FINISHED and partition 1 in
// DELETE_PARTITION_FINISHED; otherTopicsPerScale·scale other topics have
// otherPartitions partitions of otherSegments segments, all in
// COPY_SEGMENT_FINISHED. At 100× that is 8,000 partitions: enough that
// reading rlmm_partitions whole costs more than any index probe.
const (
	planPartitions      = 4
	planSegments        = 50
	planForgotten       = 10
	otherTopicsPerScale = 2
	otherPartitions     = 40
	otherSegments       = 5
)

func TestCtlPlansIndependentOfStatistics(t *testing.T) {
	t.Parallel()
	plancheck.Compare(t, measureCtlPlans, func(t *testing.T, name string, s, l ctlPlan) {
		t.Logf("%-44s small %5d buffers %5d rows   large %6d buffers %5d rows", name, s.cost.Buffers, s.cost.Rows, l.cost.Buffers, l.cost.Rows)
		allowed := plancheck.Allowed(s.cost, l.cost)
		if l.topicLevel {
			allowed += l.partitionPages
		}
		if l.wholeTable {
			// Linear in the data: 100× the rows read, each index probe up
			// to a level deeper, stays within twice 100× the small cost,
			// and a plan that probes an index per row returned (where the
			// small size hashed) within a few buffers a row; a plan worse
			// than linear (a scan per row) goes far beyond it.
			allowed = 2*100*s.cost.Buffers + 12 + 5*l.cost.Rows
		}
		require.LessOrEqualf(t, l.cost.Buffers, allowed,
			"%s: %d buffers at 100× the size against %d (%d and %d rows): the plan grows with the data:\n%s",
			name, l.cost.Buffers, s.cost.Buffers, s.cost.Rows, l.cost.Rows, l.cost.Plan)
	})
}

// ctlPlan is a statement's measured custom plan.
type ctlPlan struct {
	cost       plancheck.Cost
	wholeTable bool
	// topicLevel: a statement about one topic, which may read
	// rlmm_partitions, heap and indexes (partitionPages), once.
	topicLevel     bool
	partitionPages int
}

// measureCtlPlans loads the store at scale in state and explains every
// statement of queries/ as the commands send it.
func measureCtlPlans(t *testing.T, state plancheck.State, scale int) map[string]ctlPlan {
	t.Helper()
	ctx := t.Context()
	pool := pgtest.NewPool(t)
	plans := uuid.New()
	plancheck.Load(t, pool, state, scale, func(from, to int) {
		if from == 0 {
			loadTopic(t, pool, "plans", plans, planPartitions, planSegments, planForgotten)
		}
		loadOtherTopics(t, pool, from, to)
	})
	var segmentID uuid.UUID
	require.NoError(t, pool.QueryRow(ctx, `SELECT segment_id FROM rlmm_segments WHERE topic_id = $1 AND partition = 2 LIMIT 1`, plans).Scan(&segmentID))

	rec := plancheck.NewRecorder(pool)
	cases := []struct {
		name       string
		run        func() error
		wholeTable bool
		topicLevel bool
		// walked is the number of index probes a statement makes by
		// design (the dry run counts each candidate's epoch rows).
		walked int
	}{
		{name: "partitions list --topic", topicLevel: true, run: func() error {
			return wantRows(listPartitions(ctx, rec, partitionFilter{topic: "plans"}))
		}},
		{name: "partitions list --topic-id", topicLevel: true, run: func() error {
			return wantRows(listPartitions(ctx, rec, partitionFilter{topicID: plans}))
		}},
		{name: "partitions list", wholeTable: true, run: func() error {
			return wantRows(listPartitions(ctx, rec, partitionFilter{}))
		}},
		{name: "partition by topic name", topicLevel: true, run: func() error {
			_, err := (&partitionFlags{topic: "plans", partition: 1}).resolve(ctx, rec)
			return err
		}},
		{name: "partition by topic id", run: func() error {
			_, err := (&partitionFlags{parsedID: plans, partition: 1}).resolve(ctx, rec)
			return err
		}},
		{name: "partition delete state", run: func() error {
			_, err := queries.PartitionDeleteState(ctx, rec, ctldb.PartitionDeleteStateParams{TopicID: plans, Partition: 1})
			return err
		}},
		{name: "segments get", run: func() error { _, err := getSegment(ctx, rec, segmentID); return err }},
		{name: "segments set-state's read", run: func() error { _, err := queries.SegmentLocate(ctx, rec, segmentID); return err }},
		{name: "purge cutoff", run: func() error { _, err := queries.PurgeCutoff(ctx, rec, 0); return err }},
		{name: "purge dry run", walked: planForgotten + planSegments, run: func() error {
			totals, err := previewPurge(ctx, rec, time.Now().Add(time.Hour))
			if err == nil && (len(totals) != 1 || totals[0].segments != planForgotten+planSegments) {
				err = fmt.Errorf("the dry run found %+v, want %d segments of plans", totals, planForgotten+planSegments)
			}
			return err
		}},
		{name: "migrate: schema version", run: func() error { _, err := schemaVersion(ctx, rec); return err }},
		{name: "migrate down: rollback check", wholeTable: true, run: func() error {
			// What rollbackLosses counts before it refuses to roll back
			// the baseline.
			rows, err := metadataRowCount(ctx, rec)
			if err == nil && rows == 0 {
				err = fmt.Errorf("counted no metadata rows")
			}
			return err
		}},
	}

	var partitionPages int
	require.NoError(t, pool.QueryRow(ctx, `SELECT pg_total_relation_size('rlmm_partitions') / current_setting('block_size')::int`).Scan(&partitionPages))
	explainConn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	require.NoError(t, err)
	t.Cleanup(func() { explainConn.Close(context.Background()) })
	out := make(map[string]ctlPlan)
	for _, c := range cases {
		rec.Take()
		require.NoError(t, c.run(), c.name)
		sent := rec.Take()
		require.NotEmpty(t, sent, c.name)
		for i, st := range sent {
			name := fmt.Sprintf("%s (statement %d)", c.name, i+1)
			if st.SQL == schemaVersionSQL {
				// goose's version table is no part of the schema sqlc
				// reads (schemaVersion says why): not a ctldb statement.
				continue
			}
			cost := plancheck.Explain(t, explainConn, "force_custom_plan", st.SQL, simpleArgs(st.Args))
			cost.Walked = c.walked
			out[name] = ctlPlan{cost: cost, wholeTable: c.wholeTable, topicLevel: c.topicLevel, partitionPages: partitionPages}
		}
	}
	return out
}

// simpleArgs spells the arguments that the simple protocol of
// plancheck.Explain cannot write (a uuid[] of unknown type) as text.
func simpleArgs(args []any) []any {
	out := slices.Clone(args)
	for i, a := range out {
		if ids, ok := a.([]uuid.UUID); ok {
			texts := make([]string, len(ids))
			for j, id := range ids {
				texts[j] = id.String()
			}
			out[i] = texts
		}
	}
	return out
}

func wantRows(parts []partitionSummary, err error) error {
	if err == nil && len(parts) == 0 {
		return fmt.Errorf("listed no partition")
	}
	return err
}

// loadTopic writes one topic of nPartitions partitions of nSegments
// segments through COPY: segments of one leader epoch (no epoch rows) in
// COPY_SEGMENT_FINISHED, and epoch ends, except the first forgotten of
// partition 0, in DELETE_SEGMENT_FINISHED; with forgotten > 0, partition
// 1's delete has finished.
func loadTopic(t *testing.T, pool *pgxpool.Pool, topic string, topicID uuid.UUID, nPartitions int32, nSegments int64, forgotten int) {
	t.Helper()
	var partitions, segments, ends [][]any
	for p := range nPartitions {
		var deleteState, deleteBroker, deleteTime any // NULL: no delete record
		if p == 1 && forgotten > 0 {
			deleteState, deleteBroker, deleteTime = int16(2), int32(1), int64(0)
		}
		partitions = append(partitions, []any{topicID, p, topic, 2 * nSegments, int64(89), deleteState, deleteBroker, deleteTime})
		for i := range nSegments {
			id, state := uuid.New(), int16(1)
			if p == 0 && i < int64(forgotten) {
				state = 3
			}
			segments = append(segments, []any{topicID, p, id, topic, i * 100, i*100 + 89, i, int32(1), int64(0), int32(1000),
				state, true, []int32{0}, []int64{i * 100}, 2*i + 1, 2*i + 2, 2*i + 2, uint64(3)})
		}
		ends = append(ends, []any{topicID, p, int32(0), int64(0)})
	}
	copyRows(t, pool, "rlmm_partitions", []string{"topic_id", "partition", "topic", "delete_version", "max_segment_span", "delete_state",
		"delete_broker_id", "delete_event_timestamp_ms"}, partitions)
	copyRows(t, pool, "rlmm_segments", []string{"topic_id", "partition", "segment_id", "topic", "start_offset", "end_offset",
		"max_timestamp_ms", "broker_id", "event_timestamp_ms", "segment_size_bytes", "state", "txn_index_empty", "epochs",
		"epoch_start_offsets", "added_version", "finished_version", "last_version", "last_xid"}, segments)
	copyRows(t, pool, "rlmm_epoch_ends", []string{"topic_id", "partition", "epoch", "end_offset"}, ends)
}

// loadOtherTopics writes the other topics of scales (from, to].
func loadOtherTopics(t *testing.T, pool *pgxpool.Pool, from, to int) {
	t.Helper()
	for i := from * otherTopicsPerScale; i < to*otherTopicsPerScale; i++ {
		loadTopic(t, pool, fmt.Sprintf("other-%d", i), uuid.New(), otherPartitions, otherSegments, 0)
	}
}

func copyRows(t *testing.T, pool *pgxpool.Pool, table string, columns []string, rows [][]any) {
	t.Helper()
	n, err := pool.CopyFrom(t.Context(), pgx.Identifier{table}, columns, pgx.CopyFromRows(rows))
	require.NoError(t, err, table)
	require.EqualValues(t, len(rows), n, table)
}
