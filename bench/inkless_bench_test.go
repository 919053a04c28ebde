package bench_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/dbuuid"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/rstest"
)

// BenchmarkInklessWrites runs the library's add + finish next to its peer,
// an emulation of Aiven Inkless's PostgreSQL remote log metadata manager
// (the RemoteLogMetadataDao of its remote_log_metadata/postgres package and
// its db/rlmm migration), and next to two raw single-row UPDATE commits
// (BenchmarkWriteFloor's baseline), at 1, 8 and 32 clients. All three run on
// one database of their own per client count, with the same server, the
// same durability settings (the server's defaults: fsync and
// synchronous_commit on) and the same pool (pgxpool, one connection per
// client); call i writes to partition i mod clients.
//
// Sub-benchmarks run in the order raw, Inkless, library, so that the later
// ones report their ratios to the earlier ones measured in the same run:
//
//   - of-raw: the raw commits' ns/op ÷ this row's ns/op (1 is as fast as
//     two raw UPDATE commits; the write target is 0.7);
//
//   - x-inkless (library only): Inkless's ns/op ÷ the library's (the
//     target is 2);
//
//   - round-trips/op: the statements the pool sent (queries, batches,
//     prepares), counted by a tracer; each is one round trip;
//
//   - WAL-B/op: WAL bytes written per call (pg_current_wal_lsn), the
//     server's whole output, other databases' included.
//
// Repeat the command rather than pass -count: -count repeats each
// sub-benchmark in a row, and the ratios then take the last run of the
// earlier ones.
//
//	go test -run '^$' -bench '^BenchmarkInklessWrites$' -benchtime 3s ./bench
//
// What the emulation keeps, for one segment with one leader epoch (as every
// add here carries), with the round trips it spends:
//
//   - the four tables (partitions, segments with the epoch map as JSONB,
//     segment epochs with a "referenced" flag, per-epoch high watermarks),
//     their primary keys, partial indexes, CHECK constraints and foreign
//     keys, in a schema of their own (inkless_rlmm);
//   - one transaction per call, as jOOQ's transactionResult runs it on
//     pgjdbc with autocommit off: BEGIN travels with the first statement
//     (pgjdbc prepends it; here a two-statement pgx batch), COMMIT is a
//     round trip of its own;
//   - add, 5 round trips: BEGIN + upsert of the partition row (which bumps
//     its revision and returns the row, locking it until commit); SELECT of
//     the segment by key; INSERT of the segment; one INSERT per epoch of an
//     unreferenced epoch row; COMMIT;
//   - finish (COPY_SEGMENT_FINISHED), 9 round trips: BEGIN + upsert of the
//     partition row; SELECT of the segment; UPDATE of its state, broker,
//     event time, custom metadata and updated_at; then per epoch: SELECT of
//     the epoch's watermark; UPDATE unreferencing the epoch rows at or after
//     this start (when the watermark is not beyond this segment); DELETE of
//     another segment's referenced row at the same start; INSERT … ON
//     CONFLICT DO UPDATE referencing this segment's epoch row; INSERT … ON
//     CONFLICT DO UPDATE raising the watermark; COMMIT.
//
// 5 + 9 = 14 round trips per add + finish, where the library spends 2.
// Statements are prepared once per connection and reused, as pgjdbc does
// after its prepare threshold.
//
// What it leaves out: Kafka's classes and the JVM (the emulation is Go and
// pgx, so it measures the database work and the round trips, not jOOQ's
// rendering or HikariCP), the cluster_id configuration (a constant here),
// its metrics, reads and the delete paths, and the checks that refuse a
// re-add with different content or a write to a deleted partition (they
// are comparisons in memory on the rows it already fetched, no round trip).
func BenchmarkInklessWrites(b *testing.B) {
	for _, clients := range []int{1, 8, 32} {
		dsn := writeFloorDatabase(b, inklessSchema+`
CREATE TABLE bench_raw (id integer PRIMARY KEY, event_timestamp_ms bigint NOT NULL, pad text NOT NULL);
INSERT INTO bench_raw SELECT g, 0, repeat('x', 150) FROM generate_series(0, 1999) g;
ANALYZE bench_raw;`)
		var rawNs, inklessNs float64
		for _, v := range []struct {
			name string
			op   writeFloorOp
		}{
			{"two raw UPDATE commits", rawTwoCommits},
			{"inkless add + finish", inklessAddFinish},
			{"library add + finish", libraryAddFinish},
		} {
			b.Run(fmt.Sprintf("clients=%d/%s", clients, v.name), func(b *testing.B) {
				pool, counter := countedPool(b, dsn, clients)
				w := writeFloor{pool: pool, clients: clients, topic: uuid.New()}
				m, err := rs.NewPgManager(b.Context(), pool)
				require.NoError(b, err)
				b.Cleanup(m.Close)
				w.m = m
				var walBefore, walAfter int64
				require.NoError(b, pool.QueryRow(b.Context(), "SELECT pg_current_wal_lsn() - '0/0'").Scan(&walBefore))
				counter.Take()
				parallel(b, clients, func(ctx context.Context, rng *rand.Rand) error { return v.op(ctx, &w, rng) })
				b.StopTimer()
				trips, _ := counter.Take()
				require.NoError(b, pool.QueryRow(b.Context(), "SELECT pg_current_wal_lsn() - '0/0'").Scan(&walAfter))
				b.ReportMetric(float64(walAfter-walBefore)/float64(b.N), "WAL-B/op")
				ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
				b.ReportMetric(float64(trips)/float64(b.N), "round-trips/op")
				b.ReportMetric(ns/1000, "µs/op")
				switch v.name {
				case "two raw UPDATE commits":
					rawNs = ns
				case "inkless add + finish":
					inklessNs = ns
					b.ReportMetric(rawNs/ns, "of-raw")
				default:
					b.ReportMetric(rawNs/ns, "of-raw")
					b.ReportMetric(inklessNs/ns, "x-inkless")
				}
			})
		}
	}
}

// TestInklessEmulation checks that the emulation does what it stands for:
// an add and its finish leave the segment finished with its epoch row
// referenced and the epoch's watermark at its end, and cost 14 round trips
// once the statements are prepared.
func TestInklessEmulation(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	pool, counter := countedPool(t, dsn, 1)
	_, err := pool.Exec(t.Context(), inklessSchema)
	require.NoError(t, err)
	w := writeFloor{pool: pool, clients: 1, topic: uuid.New()}
	for i := range 3 {
		counter.Take()
		require.NoError(t, inklessAddFinish(t.Context(), &w, nil))
		if i > 0 { // the first call also prepares the statements
			trips, _ := counter.Take()
			require.Equal(t, int64(14), trips, "round trips of add + finish %d", i)
		}
	}
	var state, referenced, watermark int64
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT
    (SELECT count(*) FROM inkless_rlmm.rlmm_segments WHERE state = 1),
    (SELECT count(*) FROM inkless_rlmm.rlmm_segment_epochs WHERE referenced),
    (SELECT highest_offset FROM inkless_rlmm.rlmm_epoch_state WHERE epoch = 0)`).Scan(&state, &referenced, &watermark))
	require.Equal(t, []int64{3, 3, 399}, []int64{state, referenced, watermark})
}

// inklessSchema is the emulation's schema: Inkless's four RLMM tables with
// their keys, indexes, checks and foreign keys (two identical partial
// indexes on the epoch rows included, as it creates them).
const inklessSchema = `
CREATE SCHEMA inkless_rlmm;
CREATE TABLE inkless_rlmm.rlmm_partitions (
    cluster_id text NOT NULL,
    topic_id uuid NOT NULL,
    partition_id integer NOT NULL,
    delete_state smallint CHECK (delete_state BETWEEN 0 AND 2),
    delete_event_timestamp_ms bigint,
    delete_broker_id integer,
    revision bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (cluster_id, topic_id, partition_id)
);
CREATE TABLE inkless_rlmm.rlmm_segments (
    cluster_id text NOT NULL,
    topic_id uuid NOT NULL,
    partition_id integer NOT NULL,
    segment_id uuid NOT NULL,
    start_offset bigint NOT NULL CHECK (start_offset >= 0),
    end_offset bigint NOT NULL CHECK (end_offset >= start_offset),
    max_timestamp_ms bigint NOT NULL,
    segment_size integer NOT NULL CHECK (segment_size >= 0),
    txn_idx_empty boolean NOT NULL,
    leader_epochs jsonb NOT NULL,
    state smallint NOT NULL CHECK (state BETWEEN 0 AND 3),
    custom_metadata bytea,
    broker_id integer NOT NULL,
    event_timestamp_ms bigint NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cluster_id, topic_id, partition_id, segment_id),
    FOREIGN KEY (cluster_id, topic_id, partition_id) REFERENCES inkless_rlmm.rlmm_partitions ON UPDATE CASCADE
);
CREATE INDEX ON inkless_rlmm.rlmm_segments (cluster_id, topic_id, partition_id) WHERE state <> 3;
CREATE TABLE inkless_rlmm.rlmm_segment_epochs (
    cluster_id text NOT NULL,
    topic_id uuid NOT NULL,
    partition_id integer NOT NULL,
    segment_id uuid NOT NULL,
    epoch integer NOT NULL,
    epoch_start_offset bigint NOT NULL,
    epoch_end_offset bigint NOT NULL,
    referenced boolean NOT NULL,
    PRIMARY KEY (cluster_id, topic_id, partition_id, segment_id, epoch),
    FOREIGN KEY (cluster_id, topic_id, partition_id, segment_id) REFERENCES inkless_rlmm.rlmm_segments
        ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE UNIQUE INDEX ON inkless_rlmm.rlmm_segment_epochs (cluster_id, topic_id, partition_id, epoch, epoch_start_offset)
    WHERE referenced;
CREATE INDEX ON inkless_rlmm.rlmm_segment_epochs (cluster_id, topic_id, partition_id, epoch, epoch_start_offset)
    WHERE referenced;
CREATE TABLE inkless_rlmm.rlmm_epoch_state (
    cluster_id text NOT NULL,
    topic_id uuid NOT NULL,
    partition_id integer NOT NULL,
    epoch integer NOT NULL,
    highest_offset bigint NOT NULL,
    PRIMARY KEY (cluster_id, topic_id, partition_id, epoch),
    FOREIGN KEY (cluster_id, topic_id, partition_id) REFERENCES inkless_rlmm.rlmm_partitions ON UPDATE CASCADE
);`

const inklessCluster = "bench-cluster"

// inklessAddFinish is libraryAddFinish's segment written the way the
// emulated Inkless manager writes it: an add, then its finish.
func inklessAddFinish(ctx context.Context, w *writeFloor, _ *rand.Rand) error {
	i := w.next.Add(1)
	tp := rs.TopicIDPartition{TopicID: w.topic, Topic: "writes", Partition: int32(i % int64(w.clients))}
	s := rstest.Segment(tp, i*100, i*100+99, map[rs.LeaderEpoch]int64{0: i * 100})
	if err := inklessAdd(ctx, w.pool, s); err != nil {
		return err
	}
	return inklessFinish(ctx, w.pool, rstest.Update(s, rs.CopySegmentFinished))
}

// inklessTx runs body in a transaction whose BEGIN travels with the
// partition upsert (one round trip, as pgjdbc sends it), then commits (one
// more).
func inklessTx(ctx context.Context, pool *pgxpool.Pool, tp rs.TopicIDPartition, body func(conn *pgxpool.Conn) error) (err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	defer func() {
		if err != nil {
			_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	var batch pgx.Batch
	batch.Queue("BEGIN")
	batch.Queue(`INSERT INTO inkless_rlmm.rlmm_partitions (cluster_id, topic_id, partition_id) VALUES ($1, $2, $3)
ON CONFLICT (cluster_id, topic_id, partition_id) DO UPDATE SET revision = rlmm_partitions.revision + 1
RETURNING cluster_id, topic_id, partition_id, delete_state, delete_event_timestamp_ms, delete_broker_id, revision`,
		inklessCluster, dbuuid.UUID(tp.TopicID), tp.Partition)
	results := conn.SendBatch(ctx, &batch)
	if _, err = results.Exec(); err != nil {
		_ = results.Close()
		return err
	}
	var (
		cluster       string
		topicID       dbuuid.UUID
		partition     int32
		deleteState   *int16
		deleteEventTs *int64
		deleteBroker  *int32
		revision      int64
	)
	if err = results.QueryRow().Scan(&cluster, &topicID, &partition, &deleteState, &deleteEventTs, &deleteBroker, &revision); err != nil {
		_ = results.Close()
		return err
	}
	if err = results.Close(); err != nil {
		return err
	}
	if deleteState != nil && *deleteState == 2 {
		return fmt.Errorf("partition %v deleted", tp)
	}
	if err = body(conn); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, "COMMIT")
	return err
}

// inklessSegment is a segment row as the emulation reads it back.
type inklessSegment struct {
	start, end   int64
	leaderEpochs []byte
	state        int16
}

// inklessSelectSegment reads the segment by key, every column (a jOOQ
// selectFrom). ok is false when there is none.
func inklessSelectSegment(ctx context.Context, conn *pgxpool.Conn, id rs.RemoteLogSegmentID) (s inklessSegment, ok bool, err error) {
	var (
		cluster                 string
		topicID, segmentID      dbuuid.UUID
		partition, size, broker int32
		maxTs, eventTs          int64
		txnEmpty                bool
		custom                  []byte
		updatedAt               time.Time
	)
	err = conn.QueryRow(ctx, `SELECT cluster_id, topic_id, partition_id, segment_id, start_offset, end_offset, max_timestamp_ms,
    segment_size, txn_idx_empty, leader_epochs, state, custom_metadata, broker_id, event_timestamp_ms, updated_at
FROM inkless_rlmm.rlmm_segments WHERE cluster_id = $1 AND topic_id = $2 AND partition_id = $3 AND segment_id = $4`,
		inklessCluster, dbuuid.UUID(id.TopicIDPartition.TopicID), id.TopicIDPartition.Partition, dbuuid.UUID(id.ID)).Scan(
		&cluster, &topicID, &partition, &segmentID, &s.start, &s.end, &maxTs, &size, &txnEmpty, &s.leaderEpochs, &s.state,
		&custom, &broker, &eventTs, &updatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, false, nil
	}
	return s, err == nil, err
}

// inklessEpoch is one epoch of a segment: its start and end offsets.
type inklessEpoch struct{ epoch, start, end int64 }

// inklessEpochs is a segment's epoch map in epoch order, with each epoch's
// end offset (the next epoch's start - 1, or the segment's end).
func inklessEpochs(m map[int64]int64, segmentEnd int64) []inklessEpoch {
	epochs := make([]inklessEpoch, 0, len(m))
	for e, start := range m {
		epochs = append(epochs, inklessEpoch{epoch: e, start: start})
	}
	slices.SortFunc(epochs, func(a, b inklessEpoch) int { return int(a.epoch - b.epoch) })
	for i := range epochs {
		epochs[i].end = segmentEnd
		if i+1 < len(epochs) {
			epochs[i].end = epochs[i+1].start - 1
		}
	}
	return epochs
}

func inklessAdd(ctx context.Context, pool *pgxpool.Pool, s rs.RemoteLogSegmentMetadata) error {
	tp := s.SegmentID.TopicIDPartition
	return inklessTx(ctx, pool, tp, func(conn *pgxpool.Conn) error {
		existing, ok, err := inklessSelectSegment(ctx, conn, s.SegmentID)
		if err != nil {
			return err
		}
		if ok {
			if existing.state != 0 {
				return fmt.Errorf("segment %s already in state %d", s.SegmentID.ID, existing.state)
			}
			return nil
		}
		m := make(map[int64]int64, len(s.SegmentLeaderEpochs))
		js := make(map[string]int64, len(s.SegmentLeaderEpochs))
		for e, start := range s.SegmentLeaderEpochs {
			m[int64(e)] = start
			js[strconv.Itoa(int(e))] = start
		}
		epochsJSON, err := json.Marshal(js)
		if err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, `INSERT INTO inkless_rlmm.rlmm_segments (cluster_id, topic_id, partition_id, segment_id,
    start_offset, end_offset, max_timestamp_ms, segment_size, txn_idx_empty, leader_epochs, state, custom_metadata,
    broker_id, event_timestamp_ms, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 0, $11, $12, $13, $14)`,
			inklessCluster, dbuuid.UUID(tp.TopicID), tp.Partition, dbuuid.UUID(s.SegmentID.ID), s.StartOffset, s.EndOffset,
			s.MaxTimestampMs, int32(s.SegmentSizeInBytes), s.TxnIndexEmpty, string(epochsJSON), []byte(nil), s.BrokerID,
			s.EventTimestampMs, time.Now()); err != nil {
			return err
		}
		for _, e := range inklessEpochs(m, s.EndOffset) {
			if _, err := conn.Exec(ctx, `INSERT INTO inkless_rlmm.rlmm_segment_epochs (cluster_id, topic_id, partition_id, segment_id,
    epoch, epoch_start_offset, epoch_end_offset, referenced) VALUES ($1, $2, $3, $4, $5, $6, $7, false)`,
				inklessCluster, dbuuid.UUID(tp.TopicID), tp.Partition, dbuuid.UUID(s.SegmentID.ID), int32(e.epoch), e.start, e.end); err != nil {
				return err
			}
		}
		return nil
	})
}

func inklessFinish(ctx context.Context, pool *pgxpool.Pool, u rs.RemoteLogSegmentMetadataUpdate) error {
	tp := u.SegmentID.TopicIDPartition
	topic, seg := dbuuid.UUID(tp.TopicID), dbuuid.UUID(u.SegmentID.ID)
	return inklessTx(ctx, pool, tp, func(conn *pgxpool.Conn) error {
		stored, ok, err := inklessSelectSegment(ctx, conn, u.SegmentID)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("no segment %s", u.SegmentID.ID)
		}
		if stored.state != 0 && stored.state != 1 {
			return fmt.Errorf("segment %s: cannot finish from state %d", u.SegmentID.ID, stored.state)
		}
		if _, err := conn.Exec(ctx, `UPDATE inkless_rlmm.rlmm_segments SET state = 1, broker_id = $5, event_timestamp_ms = $6,
    custom_metadata = $7, updated_at = $8
WHERE cluster_id = $1 AND topic_id = $2 AND partition_id = $3 AND segment_id = $4`,
			inklessCluster, topic, tp.Partition, seg, u.BrokerID, u.EventTimestampMs, []byte(nil), time.Now()); err != nil {
			return err
		}
		var js map[string]int64
		if err := json.Unmarshal(stored.leaderEpochs, &js); err != nil {
			return err
		}
		m := make(map[int64]int64, len(js))
		for k, start := range js {
			e, err := strconv.ParseInt(k, 10, 32)
			if err != nil {
				return err
			}
			m[e] = start
		}
		for _, e := range inklessEpochs(m, stored.end) {
			var watermark *int64
			err := conn.QueryRow(ctx, `SELECT highest_offset FROM inkless_rlmm.rlmm_epoch_state
WHERE cluster_id = $1 AND topic_id = $2 AND partition_id = $3 AND epoch = $4`,
				inklessCluster, topic, tp.Partition, int32(e.epoch)).Scan(&watermark)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			if watermark == nil || *watermark <= e.end {
				if _, err := conn.Exec(ctx, `UPDATE inkless_rlmm.rlmm_segment_epochs SET referenced = false
WHERE cluster_id = $1 AND topic_id = $2 AND partition_id = $3 AND epoch = $4 AND referenced AND epoch_start_offset >= $5`,
					inklessCluster, topic, tp.Partition, int32(e.epoch), e.start); err != nil {
					return err
				}
			}
			if _, err := conn.Exec(ctx, `DELETE FROM inkless_rlmm.rlmm_segment_epochs
WHERE cluster_id = $1 AND topic_id = $2 AND partition_id = $3 AND epoch = $4 AND referenced
    AND epoch_start_offset = $5 AND segment_id <> $6`,
				inklessCluster, topic, tp.Partition, int32(e.epoch), e.start, seg); err != nil {
				return err
			}
			if _, err := conn.Exec(ctx, `INSERT INTO inkless_rlmm.rlmm_segment_epochs (cluster_id, topic_id, partition_id, segment_id,
    epoch, epoch_start_offset, epoch_end_offset, referenced) VALUES ($1, $2, $3, $4, $5, $6, $7, true)
ON CONFLICT (cluster_id, topic_id, partition_id, segment_id, epoch)
DO UPDATE SET epoch_start_offset = $6, epoch_end_offset = $7, referenced = true`,
				inklessCluster, topic, tp.Partition, seg, int32(e.epoch), e.start, e.end); err != nil {
				return err
			}
			if _, err := conn.Exec(ctx, `INSERT INTO inkless_rlmm.rlmm_epoch_state (cluster_id, topic_id, partition_id, epoch, highest_offset)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (cluster_id, topic_id, partition_id, epoch)
DO UPDATE SET highest_offset = greatest(rlmm_epoch_state.highest_offset, $5)`,
				inklessCluster, topic, tp.Partition, int32(e.epoch), e.end); err != nil {
				return err
			}
		}
		return nil
	})
}
