package remotestorage_test

import (
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
)

// loadEpoch stores n finished segments of 90 offsets with gaps of 10 in one
// partition, all carrying epoch 3 (the first also epoch 2, the last also
// epoch 4), segment i with MaxTimestampMs 1000*i, plus the epoch ends the
// COPY_SEGMENT_FINISHED statement would have raised. Autovacuum is off on
// the tables, so they stay never analyzed until analyze says so.
func loadEpoch(t testing.TB, pool *pgxpool.Pool, tp rs.TopicIDPartition, n int) {
	t.Helper()
	for _, st := range []struct {
		sql  string
		args []any
	}{
		{`ALTER TABLE rlmm_partitions SET (autovacuum_enabled = false)`, []any{}},
		{`ALTER TABLE rlmm_segments SET (autovacuum_enabled = false)`, []any{}},
		{`ALTER TABLE rlmm_segment_epochs SET (autovacuum_enabled = false)`, []any{}},
		{`ALTER TABLE rlmm_epoch_ends SET (autovacuum_enabled = false)`, []any{}},
		{`INSERT INTO rlmm_partitions (topic_id, partition, topic, version, max_epoch_span)
VALUES ($1, $2, $3, 2 * $4::integer, 89)`, []any{tp.TopicID, tp.Partition, tp.Topic, n}},
		{`INSERT INTO rlmm_segments (topic_id, partition, segment_id, topic, start_offset, end_offset, max_timestamp_ms,
    broker_id, event_timestamp_ms, segment_size_bytes, state, txn_index_empty, epochs, epoch_start_offsets,
    added_version, finished_version, last_version)
SELECT $1::uuid, $2::integer, md5($1::uuid::text || i)::uuid, $3::text, i * 100, i * 100 + 89, i * 1000, 1, 0, 1000, 1, true,
    CASE WHEN i = 0 THEN ARRAY[2, 3] WHEN i = $4::integer - 1 THEN ARRAY[3, 4] ELSE ARRAY[3] END,
    CASE WHEN i = 0 OR i = $4 - 1 THEN ARRAY[i * 100, i * 100 + 40]::bigint[] ELSE ARRAY[i * 100]::bigint[] END,
    2 * i + 1, 2 * i + 2, 2 * i + 2
FROM generate_series(0, $4::integer - 1) i`, []any{tp.TopicID, tp.Partition, tp.Topic, n}},
		{`INSERT INTO rlmm_segment_epochs (topic_id, partition, segment_id, epoch, first_offset, last_offset, state,
    segment_start_offset, segment_end_offset, added_version, finished_version)
SELECT s.topic_id, s.partition, s.segment_id, s.epochs[k], s.epoch_start_offsets[k],
    coalesce(s.epoch_start_offsets[k + 1] - 1, s.end_offset), s.state, s.start_offset, s.end_offset,
    s.added_version, s.finished_version
FROM rlmm_segments s, generate_subscripts(s.epochs, 1) k
WHERE s.topic_id = $1 AND s.partition = $2`, []any{tp.TopicID, tp.Partition}},
		{`INSERT INTO rlmm_epoch_ends (topic_id, partition, epoch, end_offset, max_segment_span, raised_version)
SELECT topic_id, partition, epoch, max(last_offset), max(segment_end_offset - segment_start_offset), 2 * $3::integer
FROM rlmm_segment_epochs WHERE topic_id = $1 AND partition = $2 GROUP BY topic_id, partition, epoch`, []any{tp.TopicID, tp.Partition, n}},
	} {
		_, err := pool.Exec(t.Context(), st.sql, st.args...)
		require.NoError(t, err, st.sql)
	}
}

// TestKafkaQueriesPlans checks the plans of FirstSegmentForTimestamp and
// EpochEndOffset on epochs of 1,000 and 10,000 segments, on never-analyzed
// tables and after ANALYZE, custom and generic: no sequential scan of the
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
		loadEpoch(t, pool, tp, n)
		explainPool, err := pgxpool.New(t.Context(), dsn)
		require.NoError(t, err)
		t.Cleanup(explainPool.Close)
		buffers[n] = map[string]int{}
		for _, stage := range []string{"never analyzed", "analyzed"} {
			if stage == "analyzed" {
				_, err := pool.Exec(t.Context(), "ANALYZE rlmm_partitions, rlmm_segments, rlmm_segment_epochs, rlmm_epoch_ends")
				require.NoError(t, err)
			}
			for _, p := range probes {
				counter.take()
				require.NoError(t, p.run(m, tp, n), "%s, %d segments, %s", p.name, n, stage)
				_, queries := counter.take()
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
