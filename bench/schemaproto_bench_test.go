package bench_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/krabka/remotestorage/internal/dbuuid"
)

// BenchmarkSchemaProtoWrites (and the BenchmarkSchemaProto* after it) measure
// candidate layouts of the segment metadata
// against the library's and against the raw statements that bound them, on
// fresh, never-analyzed tables, call i on partition i mod clients. The
// candidates are tables the benchmark creates next to the library's, written
// and read by raw SQL in the shape the library would send (one statement per
// call):
//
//   - "library without …" / "library with …": the library after dropping
//     the epoch rows' foreign key or the CHECK constraints, or with each
//     table's CHECKs ANDed into one;
//   - "one row": one row per segment carrying its epoch ranges (epochs and
//     their start offsets, as rlmm_segments already does); no epoch rows. The
//     partition row is locked and bumped by every write (its version numbers
//     a partition's writes in commit order), the epoch ends are raised on a
//     finish, the row rules are one CHECK expression per table. Its segment
//     indexes: by id, list order with state in the predicate, the change
//     feed on last_version (the library's is on last_xid), the purge's and
//     the stuck view's on updated_at.
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
//	go test -run '^$' -bench '^BenchmarkSchemaProto' -benchtime 2s ./bench
func BenchmarkSchemaProtoWrites(b *testing.B) {
	for _, clients := range []int{1, 8, 32} {
		library := writeFloorDatabase(b, `
CREATE TABLE bench_raw (id integer PRIMARY KEY, event_timestamp_ms bigint NOT NULL, pad text NOT NULL);
INSERT INTO bench_raw SELECT g, 0, repeat('x', 150) FROM generate_series(0, 1999) g;
ANALYZE bench_raw;`)
		noKey := writeFloorDatabase(b, `
CREATE TABLE bench_raw (id integer PRIMARY KEY, event_timestamp_ms bigint NOT NULL, pad text NOT NULL);
INSERT INTO bench_raw SELECT g, 0, repeat('x', 150) FROM generate_series(0, 1999) g;
ANALYZE bench_raw;
`+dropForeignKey)
		oneRow := writeFloorDatabase(b, protoSchema(false))
		oneRowHOT := writeFloorDatabase(b, protoSchema(true))
		oneRowXid := writeFloorDatabase(b, protoXidSchema())
		oneRowXidNoRule := writeFloorDatabase(b, protoXidSchema()+`;
ALTER TABLE p_segments DROP CONSTRAINT p_segments_valid;`)
		bare := writeFloorDatabase(b, bareSegments)
		for _, v := range []struct {
			name string
			dsn  string
			op   writeFloorOp
		}{
			{"two raw UPDATE commits", library, rawTwoCommits},
			{"library", library, libraryAddFinish},
			{"library without the epoch rows' foreign key", noKey, libraryAddFinish},
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
	// keyShare, with xidOrder, reads the partition's delete state under a
	// FOR KEY SHARE lock (writers share it; a delete record's writer,
	// locking FOR UPDATE, waits for them and they for it), as a feed by
	// transaction id needs so that no add lands after a delete record.
	keyShare bool
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

// keyShareCTE is the CTE lp, the partition's delete state read under a FOR
// KEY SHARE lock, with a comma after it; empty without keyShare.
func (o protoShape) keyShareCTE() string {
	if !o.keyShare {
		return ""
	}
	return ` lp AS MATERIALIZED (
    SELECT p.delete_state FROM p_partitions p WHERE p.topic_id = $1 AND p.partition = $2 FOR KEY SHARE
),`
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
		live := "NOT EXISTS (SELECT 1 FROM p_partitions p WHERE p.topic_id = $1 AND p.partition = $2 AND p.delete_state IS NOT NULL)"
		if o.keyShare {
			live = "NOT EXISTS (SELECT 1 FROM lp WHERE lp.delete_state IS NOT NULL)"
		}
		return `WITH v AS MATERIALIZED (
    SELECT ` + o.version() + ` AS v
),` + o.keyShareCTE() + ` pr AS (
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
    WHERE ` + live + `
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
			if o.keyShare {
				prefix += "," + strings.TrimSuffix(o.keyShareCTE(), ",")
				live = "\n      AND NOT EXISTS (SELECT 1 FROM lp WHERE lp.delete_state = 2)"
			}
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
