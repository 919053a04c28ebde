package remotestorage_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/dbuuid"
	"github.com/krabka/remotestorage/internal/pgtest"
)

// BenchmarkSchemaProtoWrites (and the BenchmarkSchemaProto* after it) measure
// candidate layouts of the segment metadata
// against the library's and against the raw statements that bound them, on
// fresh, never-analyzed tables, call i on partition i mod clients. The
// candidates are tables the benchmark creates next to the library's, written
// and read by raw SQL in the shape the library would send (one statement per
// call):
//
//   - "library without …": the library after dropping 00012's triggers on
//     its hot path (an epoch row's segment check on insert, the epoch ends
//     raised again by a trigger on a first finish; from migration 00014 on
//     the library's finish no longer runs the latter);
//   - "one row": one row per segment carrying its epoch ranges (epochs and
//     their start offsets, as rlmm_segments already does); no epoch rows. The
//     partition row is still locked and bumped by every write (its version
//     numbers a partition's writes in commit order), the epoch ends are raised
//     on a finish, the row rules are one CHECK expression per table. Its
//     segment indexes are today's: by id, list order with state in the
//     predicate, the change feed on last_version, the purge's and the stuck
//     view's on updated_at.
//   - "one row, HOT": the same, with every segment index on columns that
//     never change (by id, list order without a predicate), so that a finish
//     is a HOT update; the change feed, the purge's and the stuck view's
//     questions move to an append-only table of changes (one row per write,
//     keyed by partition and version, partial indexes on its state).
//   - "one row ordered by an advisory lock and a sequence": the "one row"
//     tables, a partition's writes ordered without bumping its row (see
//     protoShape.lockSeq).
//   - "one row, a change feed by transaction id": the "one row" tables,
//     a partition's writes not ordered at all; the change feed reads by the
//     writers' transaction ids instead (protoXidSchema, protoShape.xidOrder).
//
// Lookups on the "one row, HOT" tables are one probe of the partition row
// (delete state and the walk's bound) and one backward walk of the list
// index from the offset, the epoch of the offset in each candidate read
// with width_bucket on its epoch start offsets.
//
//	go test -run '^$' -bench '^BenchmarkSchemaProto' -benchtime 2s .
func BenchmarkSchemaProtoWrites(b *testing.B) {
	for _, clients := range []int{1, 8, 32} {
		library := writeFloorDatabase(b, `
CREATE TABLE bench_raw (id integer PRIMARY KEY, event_timestamp_ms bigint NOT NULL, pad text NOT NULL);
INSERT INTO bench_raw SELECT g, 0, repeat('x', 150) FROM generate_series(0, 1999) g;
ANALYZE bench_raw;`)
		noTriggers := writeFloorDatabase(b, `
CREATE TABLE bench_raw (id integer PRIMARY KEY, event_timestamp_ms bigint NOT NULL, pad text NOT NULL);
INSERT INTO bench_raw SELECT g, 0, repeat('x', 150) FROM generate_series(0, 1999) g;
ANALYZE bench_raw;
DROP TRIGGER rlmm_segment_epochs_have_segment ON rlmm_segment_epochs;
DROP TRIGGER rlmm_segments_raise_epoch_ends ON rlmm_segments;`)
		oneRow := writeFloorDatabase(b, protoSchema(false))
		oneRowHOT := writeFloorDatabase(b, protoSchema(true))
		oneRowXid := writeFloorDatabase(b, protoXidSchema())
		oneRowXidNoRule := writeFloorDatabase(b, protoXidSchema()+`;
ALTER TABLE p_segments DROP CONSTRAINT p_segments_valid;`)
		bare := writeFloorDatabase(b, `
CREATE TABLE bare_segments (LIKE rlmm_segments INCLUDING DEFAULTS INCLUDING INDEXES);`)
		for _, v := range []struct {
			name string
			dsn  string
			op   writeFloorOp
		}{
			{"two raw UPDATE commits", library, rawTwoCommits},
			{"library", library, libraryAddFinish},
			{"library without the epoch rows' segment check and the epoch ends trigger", noTriggers, libraryAddFinish},
			{"one row", oneRow, protoAddFinish(false)},
			{"one row HOT", oneRowHOT, protoAddFinish(true)},
			{"one row ordered by an advisory lock and a sequence", oneRow, protoShape{ends: true, lockSeq: true}.addFinish()},
			{"one row, a change feed by transaction id", oneRowXid, protoShape{ends: true, xidOrder: true}.addFinish()},
			{"one row, a change feed by transaction id, without the epoch ends", oneRowXid, protoShape{xidOrder: true}.addFinish()},
			{"one row, a change feed by transaction id, without the epoch ends and the sequence", oneRowXid, protoShape{xidOrder: true, noSeq: true}.addFinish()},
			{"one row, a change feed by transaction id, without the epoch ends and the row rule", oneRowXidNoRule, protoShape{xidOrder: true}.addFinish()},
			{"bare segments table", bare, bareAddFinish},
			{"one row without the partition row and the epoch ends", oneRow, protoShape{}.addFinish()},
			{"one row without the partition row, the epoch ends and the row rule", oneRowXidNoRule, protoShape{}.addFinish()},
			{"two raw UPDATE commits again", library, rawTwoCommits},
		} {
			b.Run(fmt.Sprintf("%s/clients=%d", v.name, clients), func(b *testing.B) { runWriteVariant(b, v.dsn, clients, v.op) })
		}
	}
}

// protoSchema creates the candidate tables: p_partitions, p_segments,
// p_epoch_ends and, for the HOT layout, p_changes.
func protoSchema(hot bool) string {
	s := `
CREATE TABLE bench_raw (id integer PRIMARY KEY, event_timestamp_ms bigint NOT NULL, pad text NOT NULL);
INSERT INTO bench_raw SELECT g, 0, repeat('x', 150) FROM generate_series(0, 1999) g;
ANALYZE bench_raw;
CREATE TABLE p_partitions (
    topic_id uuid NOT NULL,
    partition integer NOT NULL,
    topic text NOT NULL,
    version bigint NOT NULL DEFAULT 0,
    max_segment_span bigint NOT NULL DEFAULT 0,
    delete_state smallint,
    delete_broker_id integer,
    delete_event_timestamp_ms bigint,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    vanished_version bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (topic_id, partition),
    CONSTRAINT p_partitions_valid CHECK (partition >= 0 AND length(topic) BETWEEN 1 AND 249
        AND ltrim(topic, 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-') = ''
        AND topic NOT IN ('.', '..') AND version >= 0 AND max_segment_span >= 0
        AND ((delete_state IS NULL AND delete_broker_id IS NULL AND delete_event_timestamp_ms IS NULL)
             OR (delete_state IN (0, 1, 2) AND delete_broker_id IS NOT NULL AND delete_event_timestamp_ms IS NOT NULL)))
) WITH (fillfactor = 50);
CREATE SEQUENCE p_versions;
CREATE TABLE p_epoch_ends (
    topic_id uuid NOT NULL,
    partition integer NOT NULL,
    epoch integer NOT NULL,
    end_offset bigint NOT NULL,
    max_segment_span bigint NOT NULL,
    raised_version bigint NOT NULL,
    PRIMARY KEY (topic_id, partition, epoch),
    CONSTRAINT p_epoch_ends_valid CHECK (epoch >= 0 AND end_offset >= 0 AND max_segment_span >= 0)
);
CREATE TABLE p_segments (
    segment_id uuid NOT NULL,
    topic_id uuid NOT NULL,
    partition integer NOT NULL,
    topic text NOT NULL,
    start_offset bigint NOT NULL,
    end_offset bigint NOT NULL,
    max_timestamp_ms bigint NOT NULL,
    broker_id integer NOT NULL,
    event_timestamp_ms bigint NOT NULL,
    segment_size_bytes integer NOT NULL,
    custom_metadata bytea,
    state smallint NOT NULL,
    txn_index_empty boolean NOT NULL,
    epochs integer[] NOT NULL,
    epoch_start_offsets bigint[] NOT NULL,
    added_version bigint NOT NULL,
    finished_version bigint,
    last_version bigint NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT p_segments_valid CHECK (partition >= 0 AND start_offset >= 0 AND end_offset >= start_offset
        AND state IN (0, 1, 2, 3) AND segment_size_bytes >= 0
        AND cardinality(epochs) >= 1 AND cardinality(epochs) = cardinality(epoch_start_offsets)
        AND epoch_start_offsets[1] = start_offset AND epoch_start_offsets[cardinality(epoch_start_offsets)] <= end_offset
        AND (state <> 1 OR finished_version IS NOT NULL))
)`
	if hot {
		return s + ` WITH (fillfactor = 70);
ALTER TABLE p_segments ADD PRIMARY KEY (segment_id);
CREATE INDEX p_segments_list_idx ON p_segments (topic_id, partition, start_offset, added_version);
CREATE TABLE p_changes (
    topic_id uuid NOT NULL,
    partition integer NOT NULL,
    version bigint NOT NULL,
    segment_id uuid NOT NULL,
    state smallint NOT NULL,
    at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (topic_id, partition, version)
);
CREATE INDEX p_changes_forgotten_idx ON p_changes (at) WHERE state = 3;
CREATE INDEX p_changes_in_flight_idx ON p_changes (at) WHERE state IN (0, 2);`
	}
	return s + `;
ALTER TABLE p_segments ADD PRIMARY KEY (segment_id);
CREATE INDEX p_segments_list_idx ON p_segments (topic_id, partition, start_offset, added_version) WHERE state IN (0, 1, 2);
CREATE INDEX p_segments_changes_idx ON p_segments (topic_id, partition, last_version);
CREATE INDEX p_segments_forgotten_idx ON p_segments (updated_at) WHERE state = 3;
CREATE INDEX p_segments_in_flight_idx ON p_segments (updated_at) WHERE state IN (0, 2);`
}

// protoXidSchema is protoSchema(false) with the change feed read by
// transaction id instead of a partition's version: every write stamps
// last_xid with its transaction's id, and p_segments_changes_idx is on
// (topic_id, partition, last_xid). A reader follows a partition with a
// cursor c, a transaction id: one statement reads the rows whose last_xid
// is at least c together with pg_snapshot_xmin(pg_current_snapshot()), and
// the reader's next cursor is that xmin. Every transaction with an id below
// the xmin had ended when the statement's snapshot was taken, so a row
// stamped below it that the reader did not see can only be one it saw
// earlier or an aborted write's; rows stamped at or above it are read again
// next time. Writes then commit in any order without waiting for each
// other. The price is on the readers: a transaction left open anywhere in
// the cluster holds the xmin back, and each catch-up reads again every
// row written since it began.
func protoXidSchema() string {
	return protoSchema(false) + `;
ALTER TABLE p_segments ADD COLUMN last_xid xid8 NOT NULL DEFAULT pg_current_xact_id();
DROP INDEX p_segments_changes_idx;
CREATE INDEX p_segments_changes_idx ON p_segments (topic_id, partition, last_xid);`
}

// protoAdd is the candidate SegmentAdd: bump (or create) the partition row
// unless it has a delete record, insert the segment (and its change).
func protoAdd(hot bool) string {
	return protoShape{hot: hot, feed: hot, partition: true, ends: true}.add()
}

// protoShape picks the parts of a candidate write, to see what each costs.
type protoShape struct {
	hot       bool // the HOT layout's tables
	feed      bool // write p_changes
	partition bool // lock and bump the partition row
	ends      bool // raise the epoch ends on a finish
	// lockSeq orders a partition's writes without its row: an advisory
	// transaction lock on the partition's key, then a version from one
	// sequence for all partitions (the lock is held to commit, so a
	// partition's versions commit in order); the partition row is only
	// created when missing and read for its delete state.
	lockSeq bool
	// xidOrder orders nothing at write time: no partition lock, a version
	// from one sequence for all partitions (list key and tie-breaks only),
	// and the writing transaction's id in last_xid (protoXidSchema), which
	// the change feed reads by (see protoXidSchema). The partition row is
	// created when missing, its max_segment_span raised only when the
	// segment is longer (an UPDATE whose WHERE fails locks nothing), and
	// read for its delete state.
	xidOrder bool
	// noSeq, with xidOrder, stamps every write with version 1 instead of
	// a value of the shared sequence, to see what the sequence costs.
	noSeq bool
	// plainBump bumps the partition row with one plain UPDATE … RETURNING
	// at the start of each write (the add inserts the row only when it is
	// missing, the finish takes no FOR UPDATE first and bumps even when the
	// segment does not move, leaving a gap in the versions), to see what the
	// bump costs at its cheapest.
	plainBump bool
}

// protoPlainBump is what plainBump writes put first: the partition's
// version bumped, unless the partition is deleted (add: has a delete record).
func protoPlainBump(add bool) string {
	span, live, insert := "", "coalesce(p.delete_state, -1) <> 2", "false" // a finish never creates the row
	if add {
		span = ", max_segment_span = greatest(p.max_segment_span, $5::bigint - $4::bigint)"
		live, insert = "p.delete_state IS NULL", "true"
	}
	return `WITH up AS (
    UPDATE p_partitions AS p SET version = p.version + 1, updated_at = now()` + span + `
    WHERE p.topic_id = $1 AND p.partition = $2 AND ` + live + `
    RETURNING p.version
), ins AS (
    INSERT INTO p_partitions (topic_id, partition, topic, version)
    SELECT $1, $2, 'writes', 1
    WHERE ` + insert + ` AND NOT EXISTS (SELECT 1 FROM p_partitions p WHERE p.topic_id = $1 AND p.partition = $2)
    ON CONFLICT DO NOTHING
    RETURNING version
), pr AS MATERIALIZED (
    SELECT version FROM up UNION ALL SELECT version FROM ins
)`
}

// version is what an xidOrder write stamps as its version.
func (o protoShape) version() string {
	if o.noSeq {
		return "1::bigint"
	}
	return "nextval('p_versions')"
}

// protoLockSeq is what lockSeq writes put first: the partition's advisory
// lock, then, reading it, the version the write stamps.
const protoLockSeq = `WITH l AS MATERIALIZED (
    SELECT pg_advisory_xact_lock(hashtextextended($1::uuid::text, $2::integer)) AS locked
), v AS MATERIALIZED (
    SELECT nextval('p_versions') AS v FROM l
)`

// protoInsertSegment is the candidates' insert of a segment row, stamped
// with the version expression v (the rest of the statement may name the
// table v is read from).
func protoInsertSegment(v string) string {
	return `INSERT INTO p_segments (segment_id, topic_id, partition, topic, start_offset, end_offset, max_timestamp_ms, broker_id,
        event_timestamp_ms, segment_size_bytes, custom_metadata, state, txn_index_empty, epochs, epoch_start_offsets,
        added_version, last_version)
    SELECT $3, $1, $2, 'writes', $4, $5, 0, 0, 0, 1024, NULL, $8, true, $6::integer[], $7::bigint[], ` + v + `, ` + v
}

func (o protoShape) add() string {
	if o.plainBump {
		return protoPlainBump(true) + `, seg AS (
    ` + protoInsertSegment("pr.version") + `
    FROM pr
    RETURNING added_version
)
SELECT added_version FROM seg`
	}
	if o.xidOrder {
		return `WITH v AS MATERIALIZED (
    SELECT ` + o.version() + ` AS v
), pr AS (
    INSERT INTO p_partitions (topic_id, partition, topic, max_segment_span)
    SELECT $1, $2, 'writes', $5::bigint - $4::bigint
    WHERE NOT EXISTS (SELECT 1 FROM p_partitions p WHERE p.topic_id = $1 AND p.partition = $2)
    ON CONFLICT DO NOTHING
), span AS (
    UPDATE p_partitions AS p SET max_segment_span = $5::bigint - $4::bigint
    WHERE p.topic_id = $1 AND p.partition = $2 AND p.max_segment_span < $5::bigint - $4::bigint
), seg AS (
    ` + protoInsertSegment("v.v") + `
    FROM v
    WHERE NOT EXISTS (SELECT 1 FROM p_partitions p WHERE p.topic_id = $1 AND p.partition = $2 AND p.delete_state IS NOT NULL)
    RETURNING added_version
)
SELECT added_version FROM seg`
	}
	if o.lockSeq {
		return protoLockSeq + `, pr AS (
    INSERT INTO p_partitions (topic_id, partition, topic) VALUES ($1, $2, 'writes') ON CONFLICT DO NOTHING
), seg AS (
    ` + protoInsertSegment("v.v") + `
    FROM v
    WHERE NOT EXISTS (SELECT 1 FROM p_partitions p WHERE p.topic_id = $1 AND p.partition = $2 AND p.delete_state IS NOT NULL)
    RETURNING added_version
)
SELECT added_version FROM seg`
	}
	if !o.partition {
		return protoInsertSegment("$4::bigint") + `
    RETURNING added_version`
	}
	feed := ""
	if o.feed {
		feed = `, change AS (
    INSERT INTO p_changes (topic_id, partition, version, segment_id, state)
    SELECT $1, $2, pr.version, $3, $8 FROM pr
)`
	}
	return `WITH pr AS (
    INSERT INTO p_partitions AS p (topic_id, partition, topic, version, max_segment_span)
    VALUES ($1, $2, 'writes', 1, $5::bigint - $4::bigint)
    ON CONFLICT (topic_id, partition) DO UPDATE
    SET version = p.version + 1, max_segment_span = greatest(p.max_segment_span, excluded.max_segment_span), updated_at = now()
    WHERE p.delete_state IS NULL
    RETURNING p.version
), seg AS (
    ` + protoInsertSegment("pr.version") + `
    FROM pr
    RETURNING added_version
)` + feed + `
SELECT added_version FROM seg`
}

// protoFinish is the candidate SegmentUpdate to COPY_SEGMENT_FINISHED: lock
// the partition row, move the segment if its state is allowed, bump the
// partition's version, raise the epoch ends from the segment's own arrays
// (and record the change).
func protoFinish(hot bool) string {
	return protoShape{hot: hot, feed: hot, partition: true, ends: true}.finish()
}

func (o protoShape) finish() string {
	if o.plainBump || o.lockSeq || o.xidOrder {
		prefix, v, from, xid := protoLockSeq, "v.v", "v", ""
		live := "\n      AND NOT EXISTS (SELECT 1 FROM p_partitions p WHERE p.topic_id = $1 AND p.partition = $2 AND p.delete_state = 2)"
		if o.xidOrder {
			prefix, xid = "WITH v AS MATERIALIZED (SELECT "+o.version()+" AS v)", ", last_xid = pg_current_xact_id()"
		}
		if o.plainBump {
			prefix, v, from, live = protoPlainBump(false), "pr.version", "pr", "" // pr is empty for a deleted partition
		}
		return prefix + `, seg AS (
    UPDATE p_segments AS s
    SET state = $4, broker_id = 1, event_timestamp_ms = 1,
        finished_version = CASE WHEN $6::boolean THEN coalesce(s.finished_version, ` + v + `) ELSE s.finished_version END,
        last_version = ` + v + `, updated_at = now()` + xid + `
    FROM ` + from + `
    WHERE s.segment_id = $3 AND s.state = ANY($5::smallint[])` + live + `
    RETURNING s.*
)` + o.raiseEnds() + `
SELECT coalesce(seg.last_version, -1), seg.state
FROM (SELECT 1) AS one LEFT JOIN seg ON true`
	}
	if !o.partition {
		return `UPDATE p_segments AS s
    SET state = $4, broker_id = 1, event_timestamp_ms = 1,
        finished_version = CASE WHEN $6::boolean THEN coalesce(s.finished_version, s.last_version + 1) ELSE s.finished_version END,
        last_version = s.last_version + 1, updated_at = now()
    WHERE s.segment_id = $3 AND s.state = ANY($5::smallint[]) AND $1::uuid IS NOT NULL AND $2::integer IS NOT NULL
    RETURNING s.last_version, s.state`
	}
	ends := o.raiseEnds()
	feed := ""
	if o.feed {
		feed = `, change AS (
    INSERT INTO p_changes (topic_id, partition, version, segment_id, state)
    SELECT $1, $2, seg.last_version, $3, seg.state FROM seg
)`
	}
	return `WITH lp AS MATERIALIZED (
    SELECT p.delete_state, p.version FROM p_partitions p
    WHERE p.topic_id = $1 AND p.partition = $2
    FOR UPDATE
), seg AS (
    UPDATE p_segments AS s
    SET state = $4, broker_id = 1, event_timestamp_ms = 1,
        finished_version = CASE WHEN $6::boolean THEN coalesce(s.finished_version, lp.version + 1) ELSE s.finished_version END,
        last_version = lp.version + 1, updated_at = now()
    FROM lp
    WHERE s.segment_id = $3 AND s.state = ANY($5::smallint[]) AND coalesce(lp.delete_state, -1) <> 2
    RETURNING s.*
), pr AS (
    UPDATE p_partitions AS p SET version = seg.last_version, updated_at = now()
    FROM seg WHERE p.topic_id = $1 AND p.partition = $2
    RETURNING p.version
)` + ends + feed + `
SELECT coalesce(pr.version, -1), seg.state
FROM (SELECT 1) AS one LEFT JOIN seg ON true LEFT JOIN pr ON true`
}

// raiseEnds is the finish's CTE that raises the epoch ends from the
// segment's own arrays (empty unless o.ends).
func (o protoShape) raiseEnds() string {
	if !o.ends {
		return ""
	}
	return `, ends AS (
    INSERT INTO p_epoch_ends AS ee (topic_id, partition, epoch, end_offset, max_segment_span, raised_version)
    SELECT $1, $2, u.epoch, coalesce(lead(u.first_offset) OVER (ORDER BY u.n) - 1, seg.end_offset),
           seg.end_offset - seg.start_offset, seg.last_version
    FROM seg, unnest(seg.epochs, seg.epoch_start_offsets) WITH ORDINALITY AS u (epoch, first_offset, n)
    WHERE $6::boolean
    ON CONFLICT (topic_id, partition, epoch) DO UPDATE
    SET end_offset = greatest(ee.end_offset, excluded.end_offset),
        max_segment_span = greatest(ee.max_segment_span, excluded.max_segment_span),
        raised_version = excluded.raised_version
    WHERE excluded.end_offset > ee.end_offset OR excluded.max_segment_span > ee.max_segment_span
)`
}

func protoAddFinish(hot bool) writeFloorOp {
	return protoShape{hot: hot, feed: hot, partition: true, ends: true}.addFinish()
}

func (o protoShape) addFinish() writeFloorOp {
	add, finish := o.add(), o.finish()
	return func(ctx context.Context, w *writeFloor, _ *rand.Rand) error {
		i := w.next.Add(1)
		id := dbuuid.UUID(uuid.New())
		topic, part := dbuuid.UUID(w.topic), int32(i%int64(w.clients))
		var added int64
		if err := w.pool.QueryRow(ctx, add, topic, part, id, i*100, i*100+99, []int32{0}, []int64{i * 100}, int16(0)).Scan(&added); err != nil {
			return err
		}
		var version int64
		var state *int16
		if err := w.pool.QueryRow(ctx, finish, topic, part, id, int16(1), []int16{0, 1}, true).Scan(&version, &state); err != nil {
			return err
		}
		if version < 0 {
			return fmt.Errorf("finish of %d changed nothing", i)
		}
		return nil
	}
}

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
		rows, err := setup.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) "+protoLookup, topic, int32(0), q.epoch, q.offset)
		require.NoError(b, err)
		plan := ""
		for rows.Next() {
			var line string
			require.NoError(b, rows.Scan(&line))
			plan += line + "\n"
		}
		require.NoError(b, rows.Err())
		b.Logf("candidate lookup %s:\n%s", q.name, plan)
	}
	for _, clients := range []int{1, 8, 32} {
		pool := newPool(b, dsn, clients, false)
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

// backendCPU is the CPU time (user + system) the server process behind the
// pool's only connection has used so far: the server is local (pgtest's
// throwaway cluster), so /proc tells. Unlike a call's wall time, it does not
// grow when other processes take the cores, so it compares layouts on a busy
// machine: at 32 clients the two cores are the bound, and the ratio of
// server CPU per call is what the ratio of throughputs tends to.
func backendCPU(b *testing.B, pid int32) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(b, err)
	// The command name (field 2) is in parentheses and may hold spaces.
	fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+2:]))
	utime, err := strconv.ParseInt(fields[11], 10, 64)
	require.NoError(b, err)
	stime, err := strconv.ParseInt(fields[12], 10, 64)
	require.NoError(b, err)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// BenchmarkSchemaProtoCPU: server CPU per add + finish (and per lookup) on
// one connection, each variant on a database of its own, next to the raw
// statements. Reports server-µs/op.
//
//	go test -run '^$' -bench '^BenchmarkSchemaProtoCPU$' -benchtime 3000x .
func BenchmarkSchemaProtoCPU(b *testing.B) {
	raw := `
CREATE TABLE bench_raw (id integer PRIMARY KEY, event_timestamp_ms bigint NOT NULL, pad text NOT NULL);
INSERT INTO bench_raw SELECT g, 0, repeat('x', 150) FROM generate_series(0, 1999) g;
ANALYZE bench_raw;`
	library := writeFloorDatabase(b, raw)
	noTriggers := writeFloorDatabase(b, raw+`
DROP TRIGGER rlmm_segment_epochs_have_segment ON rlmm_segment_epochs;
DROP TRIGGER rlmm_segments_raise_epoch_ends ON rlmm_segments;`)
	noSegmentCheck := writeFloorDatabase(b, raw+`
DROP TRIGGER rlmm_segment_epochs_have_segment ON rlmm_segment_epochs;`)
	noEndsTrigger := writeFloorDatabase(b, raw+`
DROP TRIGGER rlmm_segments_raise_epoch_ends ON rlmm_segments;`)
	noRules := writeFloorDatabase(b, raw+`
ALTER TABLE rlmm_partitions DROP CONSTRAINT rlmm_partitions_valid;
ALTER TABLE rlmm_segments DROP CONSTRAINT rlmm_segments_valid;
ALTER TABLE rlmm_segment_epochs DROP CONSTRAINT rlmm_segment_epochs_valid;
ALTER TABLE rlmm_epoch_ends DROP CONSTRAINT rlmm_epoch_ends_valid;`)
	bare := writeFloorDatabase(b, raw+`
CREATE TABLE bare_segments (LIKE rlmm_segments INCLUDING DEFAULTS INCLUDING INDEXES);`)
	oneRow := writeFloorDatabase(b, protoSchema(false))
	oneRowHOT := writeFloorDatabase(b, protoSchema(true))
	oneRowXid := writeFloorDatabase(b, protoXidSchema())
	oneRowXidNoRule := writeFloorDatabase(b, protoXidSchema()+`;
ALTER TABLE p_segments DROP CONSTRAINT p_segments_valid;`)
	for _, v := range []struct {
		name string
		dsn  string
		op   writeFloorOp
	}{
		{"two raw UPDATE commits", library, rawTwoCommits},
		{"library", library, libraryAddFinish},
		{"library without 00012's triggers", noTriggers, libraryAddFinish},
		{"library without the epoch rows' segment check", noSegmentCheck, libraryAddFinish},
		{"library without the epoch ends trigger", noEndsTrigger, libraryAddFinish},
		{"library without row rules", noRules, libraryAddFinish},
		{"bare segments table", bare, bareAddFinish},
		{"one row", oneRow, protoAddFinish(false)},
		{"one row HOT", oneRowHOT, protoAddFinish(true)},
		{"one row HOT without the change feed", oneRowHOT, protoShape{hot: true, partition: true, ends: true}.addFinish()},
		{"one row HOT without the epoch ends", oneRowHOT, protoShape{hot: true, feed: true, partition: true}.addFinish()},
		{"one row HOT without the partition row", oneRowHOT, protoShape{hot: true}.addFinish()},
		{"one row ordered by an advisory lock and a sequence", oneRow, protoShape{ends: true, lockSeq: true}.addFinish()},
		{"one row ordered by an advisory lock and a sequence, without the epoch ends", oneRow, protoShape{lockSeq: true}.addFinish()},
		{"one row bumped by a plain UPDATE", oneRow, protoShape{ends: true, plainBump: true}.addFinish()},
		{"one row without the partition row and the epoch ends", oneRow, protoShape{}.addFinish()},
		{"one row, a change feed by transaction id", oneRowXid, protoShape{ends: true, xidOrder: true}.addFinish()},
		{"one row, a change feed by transaction id, without the epoch ends", oneRowXid, protoShape{xidOrder: true}.addFinish()},
		{"one row, a change feed by transaction id, without the epoch ends and the row rule", oneRowXidNoRule, protoShape{xidOrder: true}.addFinish()},
		{"two raw UPDATE commits again", library, rawTwoCommits},
	} {
		b.Run(v.name, func(b *testing.B) {
			w := writeFloor{pool: protoPool(b, v.dsn), clients: 1, topic: uuid.New()}
			m, err := rs.NewPgManager(b.Context(), w.pool)
			require.NoError(b, err)
			b.Cleanup(m.Close)
			w.m = m
			var pid int32
			require.NoError(b, w.pool.QueryRow(b.Context(), "SELECT pg_backend_pid()").Scan(&pid))
			rng := rand.New(rand.NewPCG(1, 2))
			// Warm the connection's plans and caches first.
			for range 50 {
				require.NoError(b, v.op(b.Context(), &w, rng))
			}
			before := backendCPU(b, pid)
			b.ResetTimer()
			for range b.N {
				if err := v.op(b.Context(), &w, rng); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((backendCPU(b, pid)-before).Microseconds())/float64(b.N), "server-µs/op")
		})
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
//	go test -run '^$' -bench '^BenchmarkSchemaProtoReadsCPU$' -benchtime 3000x .
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
		rows, err := setup.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) "+q.sql, q.args...)
		require.NoError(b, err)
		plan := ""
		for rows.Next() {
			var line string
			require.NoError(b, rows.Scan(&line))
			plan += line + "\n"
		}
		require.NoError(b, rows.Err())
		b.Logf("%s:\n%s", q.name, plan)
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
          < $4 - (SELECT p.max_epoch_span FROM rlmm_partitions p WHERE p.topic_id = $1 AND p.partition = $2))
   ORDER BY s.epoch_start_offsets[cardinality(s.epoch_start_offsets)] DESC, s.finished_version DESC
   LIMIT 1)
  UNION ALL
  (SELECT s.*, e.first_offset, e.last_offset
   FROM (SELECT e.segment_id, e.first_offset, e.last_offset FROM rlmm_segment_epochs e
         WHERE e.topic_id = $1 AND e.partition = $2 AND e.epoch = $3 AND e.state = 1
           AND e.last_offset < e.segment_end_offset AND e.first_offset <= $4
           AND (e.last_offset >= $4 OR e.first_offset
                < $4 - (SELECT p.max_epoch_span FROM rlmm_partitions p WHERE p.topic_id = $1 AND p.partition = $2))
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
	setup := newPool(b, dsn, 1, false)
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
		s := segment(tp, i*100, i*100+99, map[rs.LeaderEpoch]int64{rs.LeaderEpoch(epoch): i * 100})
		require.NoError(b, m.AddRemoteLogSegmentMetadata(ctx, s))
		require.NoError(b, m.UpdateRemoteLogSegmentMetadata(ctx, update(s, rs.CopySegmentFinished)))
		id := dbuuid.UUID(s.SegmentID.ID)
		var added, version int64
		var state *int16
		require.NoError(b, setup.QueryRow(ctx, add, dbuuid.UUID(tp.TopicID), int32(0), id, i*100, i*100+99, []int32{epoch}, []int64{i * 100}, int16(0)).Scan(&added))
		require.NoError(b, setup.QueryRow(ctx, finish, dbuuid.UUID(tp.TopicID), int32(0), id, int16(1), []int16{0, 1}, true).Scan(&version, &state))
		ids = append(ids, s.SegmentID.ID)
	}
	return dsn, setup, tp, ids
}
