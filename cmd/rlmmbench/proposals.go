package main

// proposals.go: measured alternatives to the library's statements, in SQL
// of the benchmark's own (the library's generated code is internal to it).

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

const opLookupCovering = "lookup: hit, segment columns in the epoch index (proposal)"

// createCoveringLookup builds rlmmbench_lookup: the finished segments' epoch
// ranges (one row per segment and epoch, from each segment's arrays) with a
// copy of their segment's columns under one index that covers them all, so
// that a hit is one index-only descent (one cold leaf page) instead of the
// library's two descents and a heap fetch. It models a lookup table of
// every epoch range, each carrying its segment's columns.
func createCoveringLookup(ctx context.Context, pool *pgxpool.Pool) error {
	begin := time.Now()
	for _, stmt := range []string{
		`DROP TABLE IF EXISTS rlmmbench_lookup`,
		`CREATE TABLE rlmmbench_lookup AS
SELECT s.epochs[k] AS epoch, s.epoch_start_offsets[k] AS first_offset,
       coalesce(s.epoch_start_offsets[k + 1] - 1, s.end_offset) AS last_offset, s.finished_version,
       s.topic_id, s.partition, s.segment_id, s.topic, s.start_offset, s.end_offset, s.max_timestamp_ms, s.broker_id,
       s.event_timestamp_ms, s.segment_size_bytes, s.custom_metadata, s.state, s.txn_index_empty, s.epochs,
       s.epoch_start_offsets, s.added_version, s.finished_version AS seg_finished_version, s.last_version,
       s.last_xid, s.created_at, s.updated_at
FROM rlmm_segments s, generate_subscripts(s.epochs, 1) AS k
WHERE s.state = 1
ORDER BY s.added_version, s.topic_id, s.partition`,
		`CREATE INDEX rlmmbench_lookup_idx ON rlmmbench_lookup (topic_id, partition, epoch, first_offset, finished_version)
INCLUDE (last_offset, segment_id, topic, start_offset, end_offset, max_timestamp_ms, broker_id, event_timestamp_ms,
         segment_size_bytes, custom_metadata, state, txn_index_empty, epochs, epoch_start_offsets, added_version,
         seg_finished_version, last_version, last_xid, created_at, updated_at)`,
		`VACUUM (FREEZE, ANALYZE) rlmmbench_lookup`,
	} {
		if err := execMaintenance(ctx, pool, stmt); err != nil {
			return err
		}
	}
	// Warm like the rest (see prewarm); without the extension, cold.
	_, _ = pool.Exec(ctx, `SELECT pg_prewarm('rlmmbench_lookup_idx')`)
	var size string
	_ = pool.QueryRow(ctx, `SELECT pg_size_pretty(pg_relation_size('rlmmbench_lookup_idx'))`).Scan(&size)
	logf("built the covering lookup index (%s) in %s", size, time.Since(begin).Round(time.Second))
	return nil
}

// coveringLookupOp is the lookup hit answered by rlmmbench_lookup alone,
// scanned into the baseline's row type.
func (w *workload) coveringLookupOp(pool *pgxpool.Pool) namedOp {
	return namedOp{name: opLookupCovering, baseline: opBaseSelect, run: func(ctx context.Context, rng *rand.Rand) (int, error) {
		p, j, offset := w.segmentAt(rng)
		tp := w.s.tp(p)
		var r wideRow
		err := pool.QueryRow(ctx, `SELECT l.topic_id, l.partition, l.segment_id, l.topic, l.start_offset, l.end_offset,
    l.max_timestamp_ms, l.broker_id, l.event_timestamp_ms, l.segment_size_bytes, l.custom_metadata, l.state,
    l.txn_index_empty, l.epochs, l.epoch_start_offsets, l.added_version, l.seg_finished_version, l.last_version,
    l.last_xid, l.created_at, l.updated_at
FROM rlmm_partitions p
JOIN rlmmbench_lookup l ON l.topic_id = p.topic_id AND l.partition = p.partition
WHERE p.topic_id = $1 AND p.partition = $2 AND p.delete_state IS DISTINCT FROM 2
  AND l.epoch = $3 AND l.first_offset <= $4 AND l.first_offset >= $4 - p.max_segment_span AND l.last_offset >= $4
ORDER BY l.first_offset DESC, l.finished_version DESC
LIMIT 1`, rawID(tp.TopicID), tp.Partition, epochAt(j, offset), offset).Scan(r.dest()...)
		if err == nil && r.start != segmentStart(j) {
			err = fmt.Errorf("%w: covering lookup found %d, want %d", errWrongAnswer, r.start, segmentStart(j))
		}
		return 1, err
	}}
}
