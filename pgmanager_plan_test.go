package remotestorage_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/dbuuid"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/plancheck"
	"github.com/krabka/remotestorage/internal/rstest"
)

// The plan test: every statement the library sends reads a number of
// buffers that does not grow with the partition or the table, whatever the
// planner knows of the data. Each statistics state (plancheck.States) is
// measured at two sizes, 100× apart, with custom and generic plans.
// Autovacuum is off for the tables, so the state is the one named.

// planScale is the data of one measurement: the queried partition holds
// 190·scale segments in epoch 0, one spanning epochs 0 and 1, 100 in epoch 1
// (whatever the scale, so the epoch queries return as many rows at both
// sizes), and otherPartitions partitions of as many segments fill the table.
const (
	// epoch1Start is where epoch 1 begins, beyond epoch 0 at every scale.
	epoch1Start        = int64(10_000_000)
	planEpoch0PerScale = 190
	planEpoch1         = 100
	otherPartitions    = 4
)

func TestPlansIndependentOfStatistics(t *testing.T) {
	t.Parallel()
	plancheck.Compare(t, measurePlans, func(t *testing.T, name string, s, l plancheck.Cost) {
		t.Logf("%-44s small %4d buffers %5d rows   large %4d buffers %5d rows", name, s.Buffers, s.Rows, l.Buffers, l.Rows)
		require.LessOrEqualf(t, l.Buffers, plancheck.Allowed(s, l),
			"%s: %d buffers at 100× the size against %d (%d and %d rows): the plan grows with the data:\n%s",
			name, l.Buffers, s.Buffers, s.Rows, l.Rows, l.Plan)
	})
}

// measurePlans loads the data at scale in state and explains every
// statement, returning the worse of the custom and generic plans of each.
func measurePlans(t *testing.T, state plancheck.State, scale int) map[string]plancheck.Cost {
	t.Helper()
	ctx := t.Context()
	dsn := pgtest.NewDatabase(t)
	admin := newPool(t, dsn, 0, false)
	topicID := uuid.New()
	tp := rs.TopicIDPartition{TopicID: topicID, Topic: "plans", Partition: 0}
	plancheck.Load(t, admin, state, scale, func(from, to int) { loadPlanData(t, admin, topicID, from, to) })

	pool, counter := newCountingPool(t, dsn)
	m, err := rs.NewPgManager(ctx, pool)
	require.NoError(t, err)
	// A manager whose replica is another pool on the same database: its
	// CaughtUp sends the replica's statement and the primary's.
	onReplica, err := rs.NewPgManager(ctx, pool, rs.WithReadReplica(newPoolCountedBy(t, dsn, counter)))
	require.NoError(t, err)
	t.Cleanup(onReplica.Close)
	// Two segments the writes work on, added through the manager.
	fresh := segment(tp, epoch1Start+planEpoch1*100+1_000_000, epoch1Start+planEpoch1*100+1_000_099, map[rs.LeaderEpoch]int64{1: epoch1Start + planEpoch1*100 + 1_000_000})
	require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, fresh))
	// A cache's snapshot that has seen the first and not the second.
	after, err := m.SnapshotForTest(ctx)
	require.NoError(t, err)
	other := segment(tp, fresh.StartOffset+100, fresh.EndOffset+100, map[rs.LeaderEpoch]int64{1: fresh.StartOffset + 100})
	require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, other))

	added := segment(tp, fresh.StartOffset+500, fresh.StartOffset+599, map[rs.LeaderEpoch]int64{1: fresh.StartOffset + 500})
	deleteTP := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "plans", Partition: 1}
	cases := []struct {
		name string
		run  func() error
		// replace rewrites the captured arguments before the EXPLAIN, for
		// writes whose captured run already changed the data.
		replace map[any]any
		// walked is the number of index probes a statement makes by
		// design (the steps of NextSegmentWithTxnIndex's walk).
		walked int
	}{
		{name: "add", replace: map[any]any{added.SegmentID.ID: uuid.New()}, run: func() error {
			return m.AddRemoteLogSegmentMetadata(ctx, added)
		}},
		{name: "update to COPY_SEGMENT_FINISHED", replace: map[any]any{fresh.SegmentID.ID: other.SegmentID.ID}, run: func() error {
			return m.UpdateRemoteLogSegmentMetadata(ctx, update(fresh, rs.CopySegmentFinished))
		}},
		{name: "update refused", run: func() error {
			if err := m.UpdateRemoteLogSegmentMetadata(ctx, update(other, rs.DeleteSegmentFinished)); !errors.Is(err, rs.ErrInvalidSegmentTransition) {
				return fmt.Errorf("want ErrInvalidSegmentTransition, got %v", err)
			}
			return nil
		}},
		{name: "lookup hit epoch 0", run: func() error {
			return expectHit(m.RemoteLogSegmentMetadata(ctx, tp, 0, 5_020))
		}},
		{name: "lookup hit epoch 1", run: func() error {
			return expectHit(m.RemoteLogSegmentMetadata(ctx, tp, 1, epoch1Start+5_020))
		}},
		{name: "lookup miss in a gap", run: func() error {
			return expectMiss(m.RemoteLogSegmentMetadata(ctx, tp, 0, 5_095))
		}},
		{name: "lookup miss past the end", run: func() error {
			return expectMiss(m.RemoteLogSegmentMetadata(ctx, tp, 1, epoch1Start*10))
		}},
		{name: "lookup miss in another epoch", run: func() error {
			return expectMiss(m.RemoteLogSegmentMetadata(ctx, tp, 7, 5_020))
		}},
		{name: "lookup miss unknown partition", run: func() error {
			return expectMiss(m.RemoteLogSegmentMetadata(ctx, deleteTP, 0, 5_020))
		}},
		{name: "highest offset", run: func() error { _, _, err := m.HighestOffsetForEpoch(ctx, tp, 1); return err }},
		{name: "list by epoch 1", run: func() error {
			l, err := m.ListRemoteLogSegmentsByEpoch(ctx, tp, 1)
			if err == nil && len(l) < planEpoch1 {
				err = fmt.Errorf("listed %d segments of epoch 1", len(l))
			}
			return err
		}},
		{name: "list page by epoch 1", run: func() error {
			for _, err := range m.RemoteLogSegmentsByEpoch(ctx, tp, 1) {
				return err
			}
			return nil
		}},
		{name: "remote log size epoch 1", run: func() error { _, err := m.RemoteLogSize(ctx, tp, 1); return err }},
		{name: "next segment with txn index", walked: 10, run: func() error {
			return expectHit(m.NextSegmentWithTxnIndex(ctx, tp, 1, epoch1Start+40))
		}},
		{name: "first segment for timestamp, near the start", run: func() error {
			return expectHit(m.FirstSegmentForTimestamp(ctx, tp, 1, 3, epoch1Start))
		}},
		// Epoch 0 grows with the data, epoch 1 does not. (TestKafkaQueriesPlans
		// measures the walk on epochs of 1,000 and 10,000 segments.)
		{name: "first segment for timestamp, a large epoch", run: func() error {
			return expectHit(m.FirstSegmentForTimestamp(ctx, tp, 0, 3, 0))
		}},
		{name: "first segment for timestamp, none", walked: planEpoch1, run: func() error {
			return expectMiss(m.FirstSegmentForTimestamp(ctx, tp, 1, 1<<40, epoch1Start))
		}},
		{name: "epoch end offset", run: func() error { return expectFound(m.EpochEndOffset(ctx, tp, 1)) }},
		{name: "caught up", run: func() error { _, err := m.CaughtUp(ctx, tp); return err }},
		{name: "caught up on a replica", run: func() error {
			ok, err := onReplica.CaughtUp(ctx, tp)
			if err == nil && !ok {
				return errors.New("a replica that is the primary is behind")
			}
			return err
		}},
		{name: "partition delete marked", run: func() error {
			return m.PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{TopicIDPartition: deleteTP, State: rs.DeletePartitionMarked})
		}},
		{name: "partition delete started", run: func() error {
			return m.PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{TopicIDPartition: deleteTP, State: rs.DeletePartitionStarted})
		}},
		// The purge: one call of rlmm_purge_round (the baseline), whose
		// three statements the Function Scan's buffers count; the data holds
		// nothing forgotten, so each must find that out from its partial
		// index, not by reading the table.
		{name: "purge forgotten", run: func() error {
			_, err := m.PurgeForgotten(ctx, 0)
			return err
		}},
		{name: "cache poll", run: func() error {
			behind, err := m.PollForTest(ctx, after, tp, deleteTP, rs.TopicIDPartition{TopicID: topicID, Partition: 3})
			if err == nil && behind == 0 {
				return errors.New("the poll found no partition behind")
			}
			return err
		}},
		{name: "cache catch-up", run: func() error {
			_, err := m.PartitionChangesForTest(ctx, tp, after)
			return err
		}},
		{name: "cache load's epoch ends", run: func() error {
			n, err := m.EpochEndsLoadForTest(ctx, tp)
			if err == nil && n != 2 {
				return fmt.Errorf("the load read the ends of %d epochs, want 2", n)
			}
			return err
		}},
		{name: "cache catch-up, one statement", run: func() error {
			n, err := m.PartitionCatchUpForTest(ctx, tp, after)
			if err == nil && n == 0 {
				return errors.New("the catch-up brought no segment")
			}
			return err
		}},
	}
	// The full list returns the whole partition: it grows with it by design
	// (O(rows)), so it is measured per row returned against the small size.
	cases = append(cases, struct {
		name    string
		run     func() error
		replace map[any]any
		walked  int
	}{name: "list", run: func() error { _, err := m.ListRemoteLogSegments(ctx, tp); return err }}, struct {
		name    string
		run     func() error
		replace map[any]any
		walked  int
	}{name: "cache load", run: func() error { _, err := m.PartitionLoadForTest(ctx, tp); return err }})

	explainConn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { explainConn.Close(context.Background()) })
	out := make(map[string]plancheck.Cost)
	for _, c := range cases {
		counter.Take()
		require.NoError(t, c.run(), c.name)
		_, queries := counter.Take()
		require.NotEmpty(t, queries, c.name)
		for i, q := range queries {
			name := c.name
			if len(queries) > 1 {
				name = fmt.Sprintf("%s (statement %d)", c.name, i+1)
			}
			args := make([]any, len(q.Args))
			for j, a := range q.Args {
				args[j] = a
				if id, ok := a.(dbuuid.UUID); ok { // the simple protocol needs a type it can write as text
					a, args[j] = uuid.UUID(id), uuid.UUID(id)
				}
				if id, ok := a.(uuid.UUID); ok {
					if r, ok := c.replace[id]; ok {
						args[j] = r
					}
				}
			}
			for _, mode := range plancheck.PlanCacheModes {
				cost := plancheck.Explain(t, explainConn, mode, q.SQL, args)
				if dir := os.Getenv("RLMM_PLAN_DUMP"); dir != "" {
					file := fmt.Sprintf("%s/%s-%d-%s-%s.json", dir, state, scale, name, mode)
					require.NoError(t, os.WriteFile(strings.ReplaceAll(file, " ", "_"), []byte(cost.Plan), 0o644))
				}
				cost.Walked = c.walked
				if old, ok := out[name]; !ok || cost.Buffers > old.Buffers {
					out[name] = cost
				}
			}
		}
	}
	return out
}

// loadPlanData writes the segments of scales (from, to] in one pass of
// INSERTs shaped as the library writes them.
func loadPlanData(t *testing.T, pool *pgxpool.Pool, topicID uuid.UUID, from, to int) {
	t.Helper()
	ctx := t.Context()
	lo, hi := from*planEpoch0PerScale, to*planEpoch0PerScale // epoch-0 segment numbers [lo, hi)
	_, err := pool.Exec(ctx, `
INSERT INTO rlmm_partitions (topic_id, partition, topic, max_segment_span)
SELECT $1::uuid, p, 'plans', 99 FROM generate_series(0, $2::int) p
ON CONFLICT DO NOTHING;
`, topicID, otherPartitions)
	require.NoError(t, err)
	// Epoch 0 of every partition: segments [lo, hi), 90 offsets then a gap
	// of 10. Epoch 1 of partition 0, at epoch1Start, beyond epoch 0 at every
	// size: 100 contiguous segments, every tenth with a transaction index.
	_, err = pool.Exec(ctx, `
INSERT INTO rlmm_segments (topic_id, partition, segment_id, topic, start_offset, end_offset, max_timestamp_ms,
    broker_id, event_timestamp_ms, segment_size_bytes, state, txn_index_empty, epochs, epoch_start_offsets,
    added_version, finished_version, last_version, last_xid)
SELECT $1::uuid, p, gen_random_uuid(), 'plans', i * 100, i * 100 + 89, i, 1, 0, 1000, 1, true,
    ARRAY[0], ARRAY[i * 100]::bigint[],
    2 * i + 1, 2 * i + 2, 2 * i + 2, pg_current_xact_id()
FROM generate_series(0, $4::int) p, generate_series($2::int, $3::int - 1) i;
`, topicID, lo, hi, otherPartitions)
	require.NoError(t, err)
	if from == 0 || to > 1 {
		// Epoch 1 of partition 0, and the segment spanning both epochs.
		_, err = pool.Exec(ctx, `
INSERT INTO rlmm_segments (topic_id, partition, segment_id, topic, start_offset, end_offset, max_timestamp_ms,
    broker_id, event_timestamp_ms, segment_size_bytes, state, txn_index_empty, epochs, epoch_start_offsets,
    added_version, finished_version, last_version, last_xid)
SELECT $1::uuid, 0, gen_random_uuid(), 'plans', $2::bigint + i * 100, $2::bigint + i * 100 + 99, i, 1, 0, 1000, 1, i % 10 <> 9,
    CASE WHEN i = 0 THEN ARRAY[0, 1] ELSE ARRAY[1] END,
    CASE WHEN i = 0 THEN ARRAY[$2::bigint, $2::bigint + 40] ELSE ARRAY[$2::bigint + i * 100] END,
    1000000 + 2 * i + 1, 1000000 + 2 * i + 2, 1000000 + 2 * i + 2, pg_current_xact_id()
FROM generate_series(0, $3::int) i
WHERE NOT EXISTS (SELECT 1 FROM rlmm_segments s WHERE s.topic_id = $1::uuid AND s.partition = 0 AND 1 = ANY(s.epochs));
`, topicID, epoch1Start, planEpoch1)
		require.NoError(t, err)
	}
	_, err = pool.Exec(ctx, `
INSERT INTO rlmm_segment_epochs (topic_id, partition, segment_id, epoch, first_offset, last_offset, state,
    segment_start_offset, segment_end_offset, added_version, finished_version, last_version, segment_size_bytes, max_timestamp_ms)
SELECT s.topic_id, s.partition, s.segment_id, s.epochs[k], s.epoch_start_offsets[k],
    coalesce(s.epoch_start_offsets[k + 1] - 1, s.end_offset), s.state, s.start_offset, s.end_offset,
    s.added_version, s.finished_version, s.last_version, s.segment_size_bytes, s.max_timestamp_ms
FROM rlmm_segments s, generate_subscripts(s.epochs, 1) k
WHERE s.topic_id = $1::uuid AND cardinality(s.epochs) > 1
ON CONFLICT DO NOTHING`, topicID)
	require.NoError(t, err)
	// The epoch ends of purged segments, below the stored rows' in each
	// epoch, as rlmm_purge_round folds them in.
	_, err = pool.Exec(ctx, `
INSERT INTO rlmm_epoch_ends AS ee (topic_id, partition, epoch, end_offset)
SELECT e.topic_id, e.partition, e.epoch, min(e.first_offset)
FROM rlmm_segment_epochs e
WHERE e.topic_id = $1::uuid AND e.finished_version IS NOT NULL
GROUP BY e.topic_id, e.partition, e.epoch
ON CONFLICT (topic_id, partition, epoch) DO NOTHING`, topicID)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
SELECT setval('rlmm_versions', greatest(nextval('rlmm_versions'), (SELECT max(last_version) FROM rlmm_segments WHERE topic_id = $1::uuid)));
`, topicID)
	require.NoError(t, err)
}

func expectFound(_ int64, ok bool, err error) error {
	if err == nil && !ok {
		return fmt.Errorf("expected a value, got none")
	}
	return err
}

func expectHit(s rs.RemoteLogSegmentMetadata, ok bool, err error) error {
	if err == nil && !ok {
		return fmt.Errorf("expected a hit, got a miss")
	}
	return err
}

// TestKafkaQueriesPlans checks the plans of FirstSegmentForTimestamp and
// EpochEndOffset on epochs of 1,000 and 10,000 segments, on never-analyzed
// tables, after ANALYZE and after VACUUM ANALYZE, custom and generic: no sequential scan of the
// segment tables, and the buffers read do not grow with the epoch.
func TestKafkaQueriesPlans(t *testing.T) {
	t.Parallel()
	type probe struct {
		name string
		run  func(m *rs.PgManager, tp rs.TopicIDPartition, n int) error
	}
	wantSegment := func(start int64) func(rs.RemoteLogSegmentMetadata, bool, error) error {
		return func(s rs.RemoteLogSegmentMetadata, ok bool, err error) error {
			switch {
			case err != nil:
				return err
			case !ok || s.StartOffset != start:
				return fmt.Errorf("want the segment at %d, got %d (found %v)", start, s.StartOffset, ok)
			}
			return nil
		}
	}
	probes := []probe{
		{"timestamp near the start of the epoch", func(m *rs.PgManager, tp rs.TopicIDPartition, n int) error {
			return wantSegment(100)(m.FirstSegmentForTimestamp(t.Context(), tp, 3, 1000, 0))
		}},
		{"timestamp from the middle, answer there", func(m *rs.PgManager, tp rs.TopicIDPartition, n int) error {
			mid := int64(n / 2)
			return wantSegment(mid * 100)(m.FirstSegmentForTimestamp(t.Context(), tp, 3, 0, mid*100+50))
		}},
		{"timestamp from the middle, five segments on", func(m *rs.PgManager, tp rs.TopicIDPartition, n int) error {
			mid := int64(n / 2)
			return wantSegment((mid + 5) * 100)(m.FirstSegmentForTimestamp(t.Context(), tp, 3, (mid+5)*1000, mid*100+95))
		}},
		{"timestamp miss past the end", func(m *rs.PgManager, tp rs.TopicIDPartition, n int) error {
			return expectMiss(m.FirstSegmentForTimestamp(t.Context(), tp, 3, 0, int64(n)*100))
		}},
		{"timestamp miss, later than every segment near the end", func(m *rs.PgManager, tp rs.TopicIDPartition, n int) error {
			return expectMiss(m.FirstSegmentForTimestamp(t.Context(), tp, 3, int64(n)*1000, int64(n-3)*100))
		}},
		{"timestamp unknown epoch", func(m *rs.PgManager, tp rs.TopicIDPartition, n int) error {
			return expectMiss(m.FirstSegmentForTimestamp(t.Context(), tp, 9, 0, 0))
		}},
		{"epoch end", func(m *rs.PgManager, tp rs.TopicIDPartition, n int) error {
			end, ok, err := m.EpochEndOffset(t.Context(), tp, 3)
			if err == nil && (!ok || end != int64(n-1)*100+39) {
				err = fmt.Errorf("epoch end: got %d %v", end, ok)
			}
			return err
		}},
		{"epoch end unknown epoch", func(m *rs.PgManager, tp rs.TopicIDPartition, n int) error {
			_, ok, err := m.EpochEndOffset(t.Context(), tp, 9)
			if err == nil && ok {
				err = fmt.Errorf("epoch end of an unknown epoch found")
			}
			return err
		}},
	}
	sizes := []int{1_000, 10_000}
	// buffers[size][stage/mode/probe]
	buffers := map[int]map[string]int{}
	for _, n := range sizes {
		dsn := pgtest.NewDatabase(t)
		pool, counter := newCountingPool(t, dsn)
		m, err := rs.NewPgManager(t.Context(), pool)
		require.NoError(t, err)
		tp := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "plans", Partition: 0}
		rstest.LoadEpoch(t, pool, tp, n)
		// Another partition whose every segment spans two epochs: the epoch
		// rows as many as the segments.
		rstest.LoadSpanning(t, pool, rs.TopicIDPartition{TopicID: tp.TopicID, Topic: tp.Topic, Partition: 1}, n)
		explainPool, err := pgxpool.New(t.Context(), dsn)
		require.NoError(t, err)
		t.Cleanup(explainPool.Close)
		buffers[n] = map[string]int{}
		for _, stage := range []string{"never analyzed", "analyzed", "vacuumed"} {
			switch stage {
			case "analyzed":
				_, err := pool.Exec(t.Context(), "ANALYZE rlmm_partitions, rlmm_segments, rlmm_segment_epochs, rlmm_epoch_ends")
				require.NoError(t, err)
			case "vacuumed": // as autovacuum leaves a table: the visibility map set, which changes the costs of heap reads
				_, err := pool.Exec(t.Context(), "VACUUM ANALYZE rlmm_partitions, rlmm_segments, rlmm_segment_epochs, rlmm_epoch_ends")
				require.NoError(t, err)
			}
			for _, p := range probes {
				counter.Take()
				require.NoError(t, p.run(m, tp, n), "%s, %d segments, %s", p.name, n, stage)
				_, queries := counter.Take()
				require.Len(t, queries, 1, p.name)
				for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
					plan, b := explain(t, explainPool, mode, queries[0])
					for _, table := range seqScannedTables(plan) {
						require.NotContainsf(t, []string{"rlmm_segments", "rlmm_segment_epochs"}, table,
							"%s (%d segments, %s, %s) scans %s sequentially:\n%s", p.name, n, stage, mode, table, plan)
					}
					require.LessOrEqualf(t, b, 60, "%s (%d segments, %s, %s) touched %d buffers:\n%s", p.name, n, stage, mode, b, plan)
					key := stage + "/" + mode + "/" + p.name
					buffers[n][key] = b
					t.Logf("%6d segments  %-15s %-18s %-55s %3d buffers", n, stage, mode, p.name, b)
				}
			}
		}
	}
	// Ten times the segments: at most one more index level on each of the
	// (at most four) indexes a plan descends.
	for key, small := range buffers[sizes[0]] {
		require.LessOrEqualf(t, buffers[sizes[1]][key], small+4, "%s: %d buffers at %d segments, %d at %d", key,
			small, sizes[0], buffers[sizes[1]][key], sizes[1])
	}
}

// TestStatementsKeepTheirGenericPlans runs every read of the API, a
// replica's CaughtUp, an add and a finish ten times on one connection of a vacuumed and analyzed database,
// and requires that the server then runs each on its generic plan. When the
// planner costs a statement's generic plan well above the plans made for its
// arguments, it plans the statement anew on every call, which costs 0.1 to
// 0.3 ms: more than a lookup's execution.
func TestStatementsKeepTheirGenericPlans(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.NewDatabase(t)
	pool := newPool(t, dsn, 1, false)
	tp := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "plans", Partition: 0}
	rstest.LoadEpoch(t, pool, tp, 1000)
	_, err := pool.Exec(ctx, "VACUUM ANALYZE rlmm_partitions, rlmm_segments, rlmm_segment_epochs, rlmm_epoch_ends")
	require.NoError(t, err)
	m, err := rs.NewPgManager(ctx, pool)
	require.NoError(t, err)
	// CaughtUp with a replica: another pool on the same database.
	replica := newPool(t, dsn, 1, false)
	onReplica, err := rs.NewPgManager(ctx, pool, rs.WithReadReplica(replica))
	require.NoError(t, err)
	t.Cleanup(onReplica.Close)
	for i := range int64(10) {
		_, err := onReplica.CaughtUp(ctx, tp)
		require.NoError(t, err)
		_, _, err = m.RemoteLogSegmentMetadata(ctx, tp, 3, 100*i+50)
		require.NoError(t, err)
		_, _, err = m.RemoteLogSegmentMetadata(ctx, tp, 3, 100*i+95) // a miss in a gap
		require.NoError(t, err)
		_, _, err = m.HighestOffsetForEpoch(ctx, tp, 3)
		require.NoError(t, err)
		_, err = m.ListRemoteLogSegmentsByEpoch(ctx, tp, 4)
		require.NoError(t, err)
		_, err = m.RemoteLogSize(ctx, tp, 3)
		require.NoError(t, err)
		_, _, err = m.FirstSegmentForTimestamp(ctx, tp, 3, 1000*i, 0)
		require.NoError(t, err)
		_, _, err = m.NextSegmentWithTxnIndex(ctx, tp, 3, 100*i)
		require.NoError(t, err)
		_, _, err = m.EpochEndOffset(ctx, tp, 3)
		require.NoError(t, err)
		s := segment(tp, 10_000_000+i*100, 10_000_000+i*100+99, map[rs.LeaderEpoch]int64{5: 10_000_000 + i*100})
		require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, s))
		require.NoError(t, m.UpdateRemoteLogSegmentMetadata(ctx, update(s, rs.CopySegmentFinished)))
	}
	var replanned []string
	seen := 0
	for _, p := range []*pgxpool.Pool{pool, replica} {
		rows, err := p.Query(ctx, `SELECT substring(statement from '-- name: (\w+)'), generic_plans, custom_plans
			FROM pg_prepared_statements WHERE statement LIKE '-- name: %' ORDER BY 1`)
		require.NoError(t, err)
		for rows.Next() {
			var name string
			var generic, custom int64
			require.NoError(t, rows.Scan(&name, &generic, &custom))
			t.Logf("%-28s generic plans %3d, custom plans %3d", name, generic, custom)
			seen++
			if generic == 0 {
				replanned = append(replanned, name)
			}
		}
		require.NoError(t, rows.Err())
	}
	require.GreaterOrEqual(t, seen, 11, "the prepared statements of the reads, the add, the finish and a replica's CaughtUp")
	require.Empty(t, replanned, "statements planned anew on every call")
}
