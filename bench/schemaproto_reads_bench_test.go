// The reads of the candidate layouts of schemaproto_bench_test.go: lookups,
// lists and sizes on them, by wall clock and by server CPU.

package bench_test

import (
	"context"
	"fmt"
	"math/rand/v2"
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
	"github.com/krabka/remotestorage/internal/rstest"
)

// protoLookup is the candidate SegmentLookup on the HOT layout: the
// partition row by its key (delete state, the walk's bound), then the list
// index walked back from the offset, each candidate's epoch at the offset
// read from its own arrays.
const protoLookup = `SELECT s.topic_id, s.partition, s.segment_id, s.topic, s.start_offset, s.end_offset, s.max_timestamp_ms,
    s.broker_id, s.event_timestamp_ms, s.segment_size_bytes, s.custom_metadata, s.state, s.txn_index_empty, s.epochs,
    s.epoch_start_offsets, s.added_version, s.finished_version, s.last_version, s.created_at, s.updated_at
FROM p_partitions p
CROSS JOIN LATERAL (
    SELECT s.* FROM p_segments s
    WHERE s.topic_id = p.topic_id AND s.partition = p.partition
      AND s.start_offset <= $4::bigint AND s.start_offset >= $4::bigint - p.max_segment_span
      AND s.end_offset >= $4::bigint AND s.state = 1
      AND s.epochs[width_bucket($4::bigint, s.epoch_start_offsets)] = $3::integer
    ORDER BY s.epoch_start_offsets[width_bucket($4::bigint, s.epoch_start_offsets)] DESC, s.finished_version DESC
    LIMIT 1
) AS s
WHERE p.topic_id = $1 AND p.partition = $2 AND p.delete_state IS DISTINCT FROM 2`

// BenchmarkSchemaProtoReads: the candidate lookup, hit and miss, on 2,000
// segments of one partition (1,900 in epoch 0, 100 in epoch 1) written
// through the candidate statements and never analyzed, next to the raw
// primary-key SELECT of an analyzed copy, and the library's lookup on the
// same segments written through the library.
func BenchmarkSchemaProtoReads(b *testing.B) {
	ctx := context.Background()
	dsn, setup, tp, ids := protoReadData(b, `
ALTER TABLE p_partitions SET (autovacuum_enabled = false);
ALTER TABLE p_segments SET (autovacuum_enabled = false);
ALTER TABLE rlmm_partitions SET (autovacuum_enabled = false);
ALTER TABLE rlmm_segments SET (autovacuum_enabled = false);
ALTER TABLE rlmm_segment_epochs SET (autovacuum_enabled = false);`)
	_, err := setup.Exec(ctx, `
CREATE TABLE bench_raw_seg AS SELECT * FROM rlmm_segments;
ALTER TABLE bench_raw_seg SET (autovacuum_enabled = false);
ALTER TABLE bench_raw_seg ADD PRIMARY KEY (topic_id, partition, segment_id);
ANALYZE bench_raw_seg;`)
	require.NoError(b, err)
	topic := dbuuid.UUID(tp.TopicID)
	for _, q := range []struct {
		name   string
		epoch  int32
		offset int64
	}{{"hit", 0, 50050}, {"miss", 1, 50050}} {
		logPlan(b, setup, "candidate lookup "+q.name, protoLookup, topic, int32(0), q.epoch, q.offset)
	}
	for _, clients := range []int{1, 8, 32} {
		pool := rstest.NewPool(b, dsn, clients, false)
		lm, err := rs.NewPgManager(ctx, pool)
		require.NoError(b, err)
		b.Cleanup(lm.Close)
		protoOne := func(ctx context.Context, epoch int32, offset int64) (bool, error) {
			rows, err := pool.Query(ctx, protoLookup, topic, int32(0), epoch, offset)
			if err != nil {
				return false, err
			}
			defer rows.Close()
			n, err := scanRaw(rows)
			return n == 1, err
		}
		ops := []struct {
			name string
			op   func(ctx context.Context, rng *rand.Rand) error
		}{
			{"raw primary-key SELECT", func(ctx context.Context, rng *rand.Rand) error {
				rows, err := pool.Query(ctx, "SELECT "+rawColumns+" FROM bench_raw_seg WHERE topic_id = $1 AND partition = $2 AND segment_id = $3",
					topic, int32(0), dbuuid.UUID(ids[rng.IntN(len(ids))]))
				if err != nil {
					return err
				}
				defer rows.Close()
				_, err = scanRaw(rows)
				return err
			}},
			{"library lookup hit", func(ctx context.Context, rng *rand.Rand) error {
				i := rng.IntN(2000)
				epoch := rs.LeaderEpoch(0)
				if i >= 1900 {
					epoch = 1
				}
				_, ok, err := lm.RemoteLogSegmentMetadata(ctx, tp, epoch, int64(i)*100+50)
				if err == nil && !ok {
					err = fmt.Errorf("lookup of segment %d missed", i)
				}
				return err
			}},
			{"library lookup miss", func(ctx context.Context, rng *rand.Rand) error {
				_, ok, err := lm.RemoteLogSegmentMetadata(ctx, tp, 1, int64(rng.IntN(1900))*100+50)
				if err == nil && ok {
					err = fmt.Errorf("lookup hit")
				}
				return err
			}},
			{"candidate lookup hit", func(ctx context.Context, rng *rand.Rand) error {
				i := rng.IntN(2000)
				epoch := int32(0)
				if i >= 1900 {
					epoch = 1
				}
				ok, err := protoOne(ctx, epoch, int64(i)*100+50)
				if err == nil && !ok {
					err = fmt.Errorf("candidate lookup of segment %d missed", i)
				}
				return err
			}},
			{"candidate lookup miss", func(ctx context.Context, rng *rand.Rand) error {
				ok, err := protoOne(ctx, 1, int64(rng.IntN(1900))*100+50)
				if err == nil && ok {
					err = fmt.Errorf("candidate lookup hit")
				}
				return err
			}},
			{"raw primary-key SELECT again", func(ctx context.Context, rng *rand.Rand) error {
				rows, err := pool.Query(ctx, "SELECT "+rawColumns+" FROM bench_raw_seg WHERE topic_id = $1 AND partition = $2 AND segment_id = $3",
					topic, int32(0), dbuuid.UUID(ids[rng.IntN(len(ids))]))
				if err != nil {
					return err
				}
				defer rows.Close()
				_, err = scanRaw(rows)
				return err
			}},
		}
		for _, o := range ops {
			b.Run(fmt.Sprintf("%s/clients=%d", o.name, clients), func(b *testing.B) { parallel(b, clients, o.op) })
		}
	}
}

// protoList is the candidate SegmentListByEpoch (and, with the sum,
// SegmentSizeByEpoch): the partition row by its key, the epoch's first and
// last start offsets from its epoch-ends row (columns this prototype fills
// after the fact; the design keeps them on every add), then one range of
// the list index filtered on the epoch.
const protoList = `SELECT s.topic_id, s.partition, s.segment_id, s.topic, s.start_offset, s.end_offset, s.max_timestamp_ms,
    s.broker_id, s.event_timestamp_ms, s.segment_size_bytes, s.custom_metadata, s.state, s.txn_index_empty, s.epochs,
    s.epoch_start_offsets, s.added_version, s.finished_version, s.last_version, s.created_at, s.updated_at
FROM p_segments s
WHERE s.topic_id = $1 AND s.partition = $2
  AND s.start_offset >= (SELECT ee.first_start_offset FROM p_epoch_ends ee
                         WHERE ee.topic_id = $1 AND ee.partition = $2 AND ee.epoch = $3::integer)
  AND s.start_offset <= (SELECT ee.last_start_offset FROM p_epoch_ends ee
                         WHERE ee.topic_id = $1 AND ee.partition = $2 AND ee.epoch = $3::integer)
  AND s.state IN (0, 1, 2) AND $3::integer = ANY(s.epochs)
  AND NOT EXISTS (SELECT 1 FROM p_partitions p WHERE p.topic_id = $1 AND p.partition = $2 AND p.delete_state = 2)
ORDER BY s.start_offset, s.added_version`

const protoSize = `SELECT coalesce(sum(s.segment_size_bytes), 0)::bigint
FROM p_segments s
WHERE s.topic_id = $1 AND s.partition = $2
  AND s.start_offset >= (SELECT ee.first_start_offset FROM p_epoch_ends ee
                         WHERE ee.topic_id = $1 AND ee.partition = $2 AND ee.epoch = $3::integer)
  AND s.start_offset <= (SELECT ee.last_start_offset FROM p_epoch_ends ee
                         WHERE ee.topic_id = $1 AND ee.partition = $2 AND ee.epoch = $3::integer)
  AND s.state IN (0, 1, 2) AND $3::integer = ANY(s.epochs)
  AND NOT EXISTS (SELECT 1 FROM p_partitions p WHERE p.topic_id = $1 AND p.partition = $2 AND p.delete_state = 2)`

// BenchmarkSchemaProtoReadsCPU: server CPU per read on one connection, the
// same 2,000 segments as BenchmarkSchemaProtoReads, never analyzed (the raw
// statements' copy analyzed). Reports server-µs/op.
//
//	go test -run '^$' -bench '^BenchmarkSchemaProtoReadsCPU$' -benchtime 3000x ./bench
func BenchmarkSchemaProtoReadsCPU(b *testing.B) {
	ctx := context.Background()
	dsn, setup, tp, ids := protoReadData(b, `
ALTER TABLE p_epoch_ends ADD COLUMN first_start_offset bigint, ADD COLUMN last_start_offset bigint;
ALTER TABLE p_partitions SET (autovacuum_enabled = false);
ALTER TABLE p_segments SET (autovacuum_enabled = false);
ALTER TABLE p_epoch_ends SET (autovacuum_enabled = false);
ALTER TABLE rlmm_partitions SET (autovacuum_enabled = false);
ALTER TABLE rlmm_segments SET (autovacuum_enabled = false);
ALTER TABLE rlmm_segment_epochs SET (autovacuum_enabled = false);
ALTER TABLE rlmm_epoch_ends SET (autovacuum_enabled = false);`)
	_, err := setup.Exec(ctx, `
UPDATE p_epoch_ends ee SET first_start_offset = b.lo, last_start_offset = b.hi
FROM (SELECT s.topic_id, s.partition, e.epoch, min(s.start_offset) AS lo, max(s.start_offset) AS hi
      FROM p_segments s, unnest(s.epochs) AS e (epoch) GROUP BY 1, 2, 3) AS b
WHERE (ee.topic_id, ee.partition, ee.epoch) = (b.topic_id, b.partition, b.epoch);
CREATE TABLE bench_raw_seg AS SELECT * FROM rlmm_segments;
ALTER TABLE bench_raw_seg SET (autovacuum_enabled = false);
ALTER TABLE bench_raw_seg ADD PRIMARY KEY (topic_id, partition, segment_id);
CREATE INDEX bench_raw_seg_range ON bench_raw_seg (topic_id, partition, start_offset);
ANALYZE bench_raw_seg;`+lastEpochIndexes)
	require.NoError(b, err)
	topic := dbuuid.UUID(tp.TopicID)
	epoch1 := int64(1900 * 100)
	for _, q := range []struct {
		name string
		sql  string
		args []any
	}{
		{"candidate list by epoch 1", protoList, []any{topic, int32(0), int32(1)}},
		{"last-epoch lookup hit", lastEpochLookup, []any{topic, int32(0), int32(0), int64(50050)}},
	} {
		logPlan(b, setup, q.name, q.sql, q.args...)
	}
	pool := protoPool(b, dsn)
	lm, err := rs.NewPgManager(ctx, pool)
	require.NoError(b, err)
	b.Cleanup(lm.Close)
	query := func(ctx context.Context, want int, sql string, args ...any) error {
		rows, err := pool.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		n, err := scanRaw(rows)
		if err == nil && n != want {
			err = fmt.Errorf("%d rows, want %d", n, want)
		}
		return err
	}
	pick := func(rng *rand.Rand) (int32, int64) {
		i := rng.IntN(2000)
		if i >= 1900 {
			return 1, int64(i)*100 + 50
		}
		return 0, int64(i)*100 + 50
	}
	var pid int32
	require.NoError(b, pool.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid))
	ops := []struct {
		name string
		op   func(ctx context.Context, rng *rand.Rand) error
	}{
		{"raw primary-key SELECT", func(ctx context.Context, rng *rand.Rand) error {
			return query(ctx, 1, "SELECT "+rawColumns+" FROM bench_raw_seg WHERE topic_id = $1 AND partition = $2 AND segment_id = $3",
				topic, int32(0), dbuuid.UUID(ids[rng.IntN(len(ids))]))
		}},
		{"library lookup hit", func(ctx context.Context, rng *rand.Rand) error {
			epoch, offset := pick(rng)
			_, ok, err := lm.RemoteLogSegmentMetadata(ctx, tp, rs.LeaderEpoch(epoch), offset)
			if err == nil && !ok {
				err = fmt.Errorf("missed")
			}
			return err
		}},
		{"candidate lookup hit", func(ctx context.Context, rng *rand.Rand) error {
			epoch, offset := pick(rng)
			return query(ctx, 1, protoLookup, topic, int32(0), epoch, offset)
		}},
		{"last-epoch lookup hit", func(ctx context.Context, rng *rand.Rand) error {
			epoch, offset := pick(rng)
			return query(ctx, 1, lastEpochLookup, topic, int32(0), epoch, offset)
		}},
		{"library lookup miss", func(ctx context.Context, rng *rand.Rand) error {
			_, ok, err := lm.RemoteLogSegmentMetadata(ctx, tp, 1, int64(rng.IntN(1900))*100+50)
			if err == nil && ok {
				err = fmt.Errorf("hit")
			}
			return err
		}},
		{"candidate lookup miss", func(ctx context.Context, rng *rand.Rand) error {
			return query(ctx, 0, protoLookup, topic, int32(0), int32(1), int64(rng.IntN(1900))*100+50)
		}},
		{"last-epoch lookup miss", func(ctx context.Context, rng *rand.Rand) error {
			return query(ctx, 0, lastEpochLookup, topic, int32(0), int32(1), int64(rng.IntN(1900))*100+50)
		}},
		{"raw range SELECT (100 rows)", func(ctx context.Context, rng *rand.Rand) error {
			return query(ctx, 100, "SELECT "+rawColumns+" FROM bench_raw_seg WHERE topic_id = $1 AND partition = $2 AND start_offset BETWEEN $3 AND $4 ORDER BY start_offset",
				topic, int32(0), epoch1, epoch1+99*100)
		}},
		{"library list by epoch 1", func(ctx context.Context, rng *rand.Rand) error {
			l, err := lm.ListRemoteLogSegmentsByEpoch(ctx, tp, 1)
			if err == nil && len(l) != 100 {
				err = fmt.Errorf("listed %d", len(l))
			}
			return err
		}},
		{"candidate list by epoch 1", func(ctx context.Context, rng *rand.Rand) error {
			return query(ctx, 100, protoList, topic, int32(0), int32(1))
		}},
		{"raw sum (100 rows)", func(ctx context.Context, rng *rand.Rand) error {
			var size int64
			return pool.QueryRow(ctx, "SELECT coalesce(sum(segment_size_bytes), 0)::bigint FROM bench_raw_seg WHERE topic_id = $1 AND partition = $2 AND start_offset BETWEEN $3 AND $4",
				topic, int32(0), epoch1, epoch1+99*100).Scan(&size)
		}},
		{"library size of epoch 1", func(ctx context.Context, rng *rand.Rand) error {
			_, err := lm.RemoteLogSize(ctx, tp, 1)
			return err
		}},
		{"candidate size of epoch 1", func(ctx context.Context, rng *rand.Rand) error {
			var size int64
			return pool.QueryRow(ctx, protoSize, topic, int32(0), int32(1)).Scan(&size)
		}},
		{"raw primary-key SELECT again", func(ctx context.Context, rng *rand.Rand) error {
			return query(ctx, 1, "SELECT "+rawColumns+" FROM bench_raw_seg WHERE topic_id = $1 AND partition = $2 AND segment_id = $3",
				topic, int32(0), dbuuid.UUID(ids[rng.IntN(len(ids))]))
		}},
	}
	for _, o := range ops {
		b.Run(o.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			for range 50 {
				require.NoError(b, o.op(ctx, rng))
			}
			before := backendCPU(b, pid)
			b.ResetTimer()
			for range b.N {
				if err := o.op(ctx, rng); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((backendCPU(b, pid)-before).Microseconds())/float64(b.N), "server-µs/op")
		})
	}
}

// lastEpochIndexes and lastEpochLookup: a lookup on the library's own
// tables that reads the answer in one index descent when the offset lies in
// its segment's last epoch (most segments carry one epoch), leaving the rest
// to an index of the epoch rows that are not their segment's last (rare, so
// its probe finds nothing), and reading the partition row for the walk's
// bound only when the first range walked does not contain the offset (an
// initplan runs when first needed). The delete state comes from the partial
// index of deleted partitions, nearly empty. Both indexes build
// concurrently, and no writer need change: a candidate for an expand-only
// migration.
const lastEpochIndexes = `
CREATE INDEX bench_last_epoch ON rlmm_segments (topic_id, partition, (epochs[cardinality(epochs)]),
    (epoch_start_offsets[cardinality(epoch_start_offsets)]), finished_version) WHERE state = 1;
CREATE INDEX bench_inner_epochs ON rlmm_segment_epochs (topic_id, partition, epoch, first_offset, finished_version)
    INCLUDE (last_offset, segment_id) WHERE state = 1 AND last_offset < segment_end_offset;`

const lastEpochLookup = `SELECT c.topic_id, c.partition, c.segment_id, c.topic, c.start_offset, c.end_offset, c.max_timestamp_ms,
    c.broker_id, c.event_timestamp_ms, c.segment_size_bytes, c.custom_metadata, c.state, c.txn_index_empty, c.epochs,
    c.epoch_start_offsets, c.added_version, c.finished_version, c.last_version, c.created_at, c.updated_at
FROM (
  (SELECT s.*, s.epoch_start_offsets[cardinality(s.epoch_start_offsets)] AS range_first, s.end_offset AS range_last
   FROM rlmm_segments s
   WHERE s.topic_id = $1 AND s.partition = $2 AND s.state = 1
     AND s.epochs[cardinality(s.epochs)] = $3
     AND s.epoch_start_offsets[cardinality(s.epoch_start_offsets)] <= $4
     AND (s.end_offset >= $4 OR s.epoch_start_offsets[cardinality(s.epoch_start_offsets)]
          < $4 - (SELECT p.max_segment_span FROM rlmm_partitions p WHERE p.topic_id = $1 AND p.partition = $2))
   ORDER BY s.epoch_start_offsets[cardinality(s.epoch_start_offsets)] DESC, s.finished_version DESC
   LIMIT 1)
  UNION ALL
  (SELECT s.*, e.first_offset, e.last_offset
   FROM (SELECT e.segment_id, e.first_offset, e.last_offset FROM rlmm_segment_epochs e
         WHERE e.topic_id = $1 AND e.partition = $2 AND e.epoch = $3 AND e.state = 1
           AND e.last_offset < e.segment_end_offset AND e.first_offset <= $4
           AND (e.last_offset >= $4 OR e.first_offset
                < $4 - (SELECT p.max_segment_span FROM rlmm_partitions p WHERE p.topic_id = $1 AND p.partition = $2))
         ORDER BY e.first_offset DESC, e.finished_version DESC
         LIMIT 1) AS e
   JOIN rlmm_segments s ON s.segment_id = e.segment_id AND (s.topic_id = $1 AND s.partition = $2) IS TRUE)
) AS c
WHERE c.range_last >= $4
  AND NOT EXISTS (SELECT 1 FROM rlmm_partitions p WHERE p.topic_id = $1 AND p.partition = $2 AND p.delete_state = 2)
ORDER BY c.range_first DESC, c.finished_version DESC
LIMIT 1`

// protoPool is a pool of one connection; PROTO_PLAN_CACHE_MODE, when set,
// is its plan_cache_mode (force_generic_plan, force_custom_plan), to see
// what re-planning costs.
func protoPool(b *testing.B, dsn string) *pgxpool.Pool {
	cfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(b, err)
	cfg.MaxConns = 1
	if mode := os.Getenv("PROTO_PLAN_CACHE_MODE"); mode != "" {
		cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = mode
	}
	pool, err := pgxpool.NewWithConfig(b.Context(), cfg)
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	return pool
}

// protoReadData creates a database and writes 2,000 segments of one partition (the last 100 in epoch
// 1) both through the library and into the prototype's one-row tables, after
// creating them with ddl run behind protoSchema: the reads' fixture.
func protoReadData(b *testing.B, ddl string) (string, *pgxpool.Pool, rs.TopicIDPartition, []uuid.UUID) {
	ctx := context.Background()
	dsn := pgtest.NewDatabase(b)
	setup := rstest.NewPool(b, dsn, 1, false)
	_, err := setup.Exec(ctx, protoSchema(true)+ddl)
	require.NoError(b, err)
	m, err := rs.NewPgManager(ctx, setup)
	require.NoError(b, err)
	b.Cleanup(m.Close)
	tp := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "writes", Partition: 0}
	add, finish := protoAdd(true), protoFinish(true)
	var ids []uuid.UUID
	for i := range int64(2000) {
		epoch := int32(0)
		if i >= 1900 {
			epoch = 1
		}
		s := rstest.Segment(tp, i*100, i*100+99, map[rs.LeaderEpoch]int64{rs.LeaderEpoch(epoch): i * 100})
		require.NoError(b, m.AddRemoteLogSegmentMetadata(ctx, s))
		require.NoError(b, m.UpdateRemoteLogSegmentMetadata(ctx, rstest.Update(s, rs.CopySegmentFinished)))
		id := dbuuid.UUID(s.SegmentID.ID)
		var added, version int64
		var state *int16
		require.NoError(b, setup.QueryRow(ctx, add, dbuuid.UUID(tp.TopicID), int32(0), id, i*100, i*100+99, []int32{epoch}, []int64{i * 100}, int16(0)).Scan(&added))
		require.NoError(b, setup.QueryRow(ctx, finish, dbuuid.UUID(tp.TopicID), int32(0), id, int16(1), []int16{0, 1}, true).Scan(&version, &state))
		ids = append(ids, s.SegmentID.ID)
	}
	return dsn, setup, tp, ids
}

// logPlan logs EXPLAIN (ANALYZE, BUFFERS) of sql with args, run on pool.
func logPlan(b *testing.B, pool *pgxpool.Pool, name, sql string, args ...any) {
	b.Helper()
	rows, err := pool.Query(b.Context(), "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) "+sql, args...)
	require.NoError(b, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(b, err)
	b.Logf("%s:\n%s", name, strings.Join(lines, "\n"))
}
