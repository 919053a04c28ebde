package main

// proposals.go: measured alternatives to statements this benchmark does not
// own. Each runs the library's own generated statement through a DBTX that
// rewrites its SQL on the way out, so the figure tracks the live statement
// and differs from it only by the proposed change.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/db"
)

const (
	opAddNoNotify    = "Add statement without its pg_notify (proposal)"
	opUpdateNoNotify = "Update statement without its pg_notify (proposal)"
)

// rewritingDBTX sends every statement through rewrite first.
type rewritingDBTX struct {
	db.DBTX
	rewrite func(string) string
}

func (r rewritingDBTX) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return r.DBTX.Exec(ctx, r.rewrite(sql), args...)
}
func (r rewritingDBTX) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return r.DBTX.Query(ctx, r.rewrite(sql), args...)
}
func (r rewritingDBTX) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return r.DBTX.QueryRow(ctx, r.rewrite(sql), args...)
}

var (
	notificationCTE = regexp.MustCompile(`(?s),\s*notification AS \(\s*SELECT pg_notify\(.*?\n\)`)
	notificationRef = regexp.MustCompile(`,\s*notification\b`)
)

// withoutNotify removes the notification CTE of a write statement and the
// references to it.
func withoutNotify(sql string) string {
	return notificationRef.ReplaceAllString(notificationCTE.ReplaceAllString(sql, ""), "")
}

// notifyFreeOps are Add and Update as the library sends them, minus the
// NOTIFY; nil when the statements carry none (or the rewrite failed to
// remove it).
func (w *workload) notifyFreeOps(pool db.DBTX) []namedOp {
	for _, sql := range []string{probeSQL(func(d db.DBTX) { _, _ = db.New().SegmentAdd(context.Background(), d, db.SegmentAddParams{}) }),
		probeSQL(func(d db.DBTX) { _, _ = db.New().SegmentUpdate(context.Background(), d, db.SegmentUpdateParams{}) })} {
		if !strings.Contains(sql, "pg_notify") || strings.Contains(withoutNotify(sql), "pg_notify") {
			return nil
		}
	}
	dbtx := rewritingDBTX{DBTX: pool, rewrite: withoutNotify}
	q := db.New()
	return []namedOp{
		{name: opAddNoNotify, baseline: opBaseUpdate, run: func(ctx context.Context, rng *rand.Rand) (int, error) {
			s := w.newSegment(rng)
			epoch := rs.LeaderEpoch(w.s.lastEpoch() + 1)
			_, err := q.SegmentAdd(ctx, dbtx, db.SegmentAddParams{
				TopicID: s.SegmentID.TopicIDPartition.TopicID, Partition: s.SegmentID.TopicIDPartition.Partition,
				Topic: s.SegmentID.TopicIDPartition.Topic, SegmentID: s.SegmentID.ID,
				StartOffset: s.StartOffset, EndOffset: s.EndOffset, MaxTimestampMs: s.MaxTimestampMs,
				BrokerID: s.BrokerID, EventTimestampMs: s.EventTimestampMs, SegmentSizeBytes: s.SegmentSizeInBytes,
				CustomMetadata: s.CustomMetadata, State: int16(s.State), TxnIndexEmpty: s.TxnIndexEmpty,
				Epochs: []int32{int32(epoch)}, EpochFirstOffsets: []int64{s.StartOffset}, EpochLastOffsets: []int64{s.EndOffset},
				MaxEpochSpan: s.EndOffset - s.StartOffset,
			})
			if err != nil {
				return 0, err
			}
			w.mu.Lock()
			w.added = append(w.added, s.SegmentID)
			w.mu.Unlock()
			return 1, nil
		}},
		{name: opUpdateNoNotify, baseline: opBaseUpdate, run: func(ctx context.Context, rng *rand.Rand) (int, error) {
			w.mu.Lock()
			n := len(w.added)
			if n == 0 {
				w.mu.Unlock()
				return 0, fmt.Errorf("no added segment to update")
			}
			id := w.added[int(w.toUpdate.Add(1)-1)%n]
			w.mu.Unlock()
			allowed := rs.AllowedSegmentFromStates(rs.CopySegmentFinished)
			codes := make([]int16, len(allowed))
			for i, a := range allowed {
				codes[i] = int16(a)
			}
			row, err := q.SegmentUpdate(ctx, dbtx, db.SegmentUpdateParams{
				TopicID: id.TopicIDPartition.TopicID, Partition: id.TopicIDPartition.Partition, SegmentID: id.ID,
				State: int16(rs.CopySegmentFinished), BrokerID: 1, EventTimestampMs: baseTimestampMs,
				Allowed: codes, Finishing: true,
			})
			if err == nil && row.UpdatedVersion < 0 {
				err = fmt.Errorf("update refused: state %d", row.CurrentState)
			}
			return 1, err
		}},
	}
}

// probeSQL returns the SQL a generated call sends, without sending it.
func probeSQL(call func(db.DBTX)) string {
	var p sqlProbe
	call(&p)
	return p.sql
}

type sqlProbe struct{ sql string }

func (p *sqlProbe) Exec(_ context.Context, sql string, _ ...any) (pgconn.CommandTag, error) {
	p.sql = sql
	return pgconn.CommandTag{}, fmt.Errorf("probe")
}
func (p *sqlProbe) Query(_ context.Context, sql string, _ ...any) (pgx.Rows, error) {
	p.sql = sql
	return nil, fmt.Errorf("probe")
}
func (p *sqlProbe) QueryRow(_ context.Context, sql string, _ ...any) pgx.Row {
	p.sql = sql
	return errRow{}
}

type errRow struct{}

func (errRow) Scan(...any) error { return fmt.Errorf("probe") }

const opLookupCovering = "lookup: hit, segment columns in the epoch index (proposal)"

// createCoveringLookup builds rlmmbench_lookup: the finished epoch ranges
// with a copy of their segment's columns under one index that covers them
// all, so that a hit is one index-only descent (one cold leaf page) instead
// of three descents (the epoch index, the segment index, the segment heap).
// It models denormalizing the segment's columns into rlmm_segment_epochs.
func createCoveringLookup(ctx context.Context, pool *pgxpool.Pool) error {
	begin := time.Now()
	for _, stmt := range []string{
		`DROP TABLE IF EXISTS rlmmbench_lookup`,
		`CREATE TABLE rlmmbench_lookup AS
SELECT e.epoch, e.first_offset, e.last_offset, e.finished_version,
       s.topic_id, s.partition, s.segment_id, s.topic, s.start_offset, s.end_offset, s.max_timestamp_ms, s.broker_id,
       s.event_timestamp_ms, s.segment_size_bytes, s.custom_metadata, s.state, s.txn_index_empty, s.epochs,
       s.epoch_start_offsets, s.added_version, s.finished_version AS seg_finished_version, s.last_version,
       s.created_at, s.updated_at
FROM rlmm_segment_epochs e
JOIN rlmm_segments s ON s.topic_id = e.topic_id AND s.partition = e.partition AND s.segment_id = e.segment_id
WHERE e.state = 1
ORDER BY s.added_version, s.topic_id, s.partition`,
		`CREATE INDEX rlmmbench_lookup_idx ON rlmmbench_lookup (topic_id, partition, epoch, first_offset, finished_version)
INCLUDE (last_offset, segment_id, topic, start_offset, end_offset, max_timestamp_ms, broker_id, event_timestamp_ms,
         segment_size_bytes, custom_metadata, state, txn_index_empty, epochs, epoch_start_offsets, added_version,
         seg_finished_version, last_version, created_at, updated_at)`,
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
    l.created_at, l.updated_at
FROM rlmm_partitions p
JOIN rlmmbench_lookup l ON l.topic_id = p.topic_id AND l.partition = p.partition
WHERE p.topic_id = $1 AND p.partition = $2 AND p.delete_state IS DISTINCT FROM 2
  AND l.epoch = $3 AND l.first_offset <= $4 AND l.first_offset >= $4 - p.max_epoch_span AND l.last_offset >= $4
ORDER BY l.first_offset DESC, l.finished_version DESC
LIMIT 1`, tp.TopicID, tp.Partition, epochAt(j, offset), offset).Scan(r.dest()...)
		if err == nil && r.start != segmentStart(j) {
			err = fmt.Errorf("%w: covering lookup found %d, want %d", errWrongAnswer, r.start, segmentStart(j))
		}
		return 1, err
	}}
}
