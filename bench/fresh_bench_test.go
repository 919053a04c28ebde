package bench_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/db"
	"github.com/krabka/remotestorage/internal/dbuuid"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/rstest"
)

// The benchmarks of a freshly written database that nothing has analyzed
// (every new cluster, every new partition before autovacuum runs). One
// partition gets 2,000 segments through the library,
// 1,900 in epoch 0 and 100 in epoch 1, added and finished, and is queried at
// once; autovacuum is off for the tables so it stays unanalyzed. Each
// operation runs next to the raw statement that bounds it, on the same
// server in the same run: a table bench_raw with the same columns and rows
// and only the index the raw statement needs, analyzed (the bound is the
// raw statement at its best).
//
//	go test -run '^$' -bench '^BenchmarkFresh$' -benchtime 3s ./bench
//
// Ratios: divide the raw row's ns/op by the library row's (docs/BENCHMARKS.md).

type freshDB struct {
	dsn    string
	tp     rs.TopicIDPartition
	ids    []uuid.UUID // the segments, in offset order
	epoch1 int64       // first offset of epoch 1
}

// BenchmarkFresh builds the database once and runs the three groups on it.
func BenchmarkFresh(b *testing.B) {
	f := freshDatabase(b)
	b.Run("Reads", func(b *testing.B) { benchmarkFreshReads(b, f) })
	b.Run("Writes", func(b *testing.B) { benchmarkFreshWrites(b, f) })
	b.Run("Freshness", func(b *testing.B) { benchmarkFreshness(b, f) })
}

func freshDatabase(b *testing.B) freshDB {
	{
		ctx := context.Background()
		dsn := pgtest.NewDatabase(b)
		pool, err := pgxpool.New(ctx, dsn)
		require.NoError(b, err)
		defer pool.Close()
		_, err = pool.Exec(ctx, `
ALTER TABLE rlmm_partitions SET (autovacuum_enabled = false);
ALTER TABLE rlmm_segments SET (autovacuum_enabled = false);
ALTER TABLE rlmm_segment_epochs SET (autovacuum_enabled = false);`)
		require.NoError(b, err)
		m, err := rs.NewPgManager(ctx, pool)
		require.NoError(b, err)
		defer m.Close()
		f := freshDB{dsn: dsn, tp: rs.TopicIDPartition{TopicID: uuid.New(), Topic: "fresh", Partition: 0}, epoch1: 1900 * 100}
		for i := range 2000 {
			epoch := rs.LeaderEpoch(0)
			if i >= 1900 {
				epoch = 1
			}
			s := rstest.Segment(f.tp, int64(i)*100, int64(i)*100+99, map[rs.LeaderEpoch]int64{epoch: int64(i) * 100})
			s.MaxTimestampMs = int64(i)
			require.NoError(b, m.AddRemoteLogSegmentMetadata(ctx, s))
			require.NoError(b, m.UpdateRemoteLogSegmentMetadata(ctx, rstest.Update(s, rs.CopySegmentFinished)))
			f.ids = append(f.ids, s.SegmentID.ID)
		}
		_, err = pool.Exec(ctx, `
CREATE TABLE bench_raw AS SELECT * FROM rlmm_segments;
ALTER TABLE bench_raw SET (autovacuum_enabled = false);
ALTER TABLE bench_raw ADD PRIMARY KEY (topic_id, partition, segment_id);
CREATE INDEX bench_raw_range ON bench_raw (topic_id, partition, start_offset);
ANALYZE bench_raw;`)
		require.NoError(b, err)
		return f
	}
}

const rawColumns = `topic_id, partition, segment_id, topic, start_offset, end_offset, max_timestamp_ms, broker_id,
event_timestamp_ms, segment_size_bytes, custom_metadata, state, txn_index_empty, epochs, epoch_start_offsets,
added_version, finished_version, last_version, created_at, updated_at`

// scanRaw scans rows into the same Go types the library's generated code
// scans a segment into.
func scanRaw(rows pgx.Rows) (int, error) {
	n := 0
	for rows.Next() {
		var r db.RlmmSegment
		if err := rows.Scan(&r.TopicID, &r.Partition, &r.SegmentID, &r.Topic, &r.StartOffset, &r.EndOffset, &r.MaxTimestampMs,
			&r.BrokerID, &r.EventTimestampMs, &r.SegmentSizeBytes, &r.CustomMetadata, &r.State, &r.TxnIndexEmpty, &r.Epochs,
			&r.EpochStartOffsets, &r.AddedVersion, &r.FinishedVersion, &r.LastVersion, &r.CreatedAt, &r.UpdatedAt); err != nil {
			return n, err
		}
		n++
	}
	return n, rows.Err()
}

// hitAt picks a segment at random and an offset inside it.
func (f freshDB) hitAt(rng *rand.Rand) (rs.LeaderEpoch, int64) {
	i := rng.IntN(len(f.ids))
	if i >= 1900 {
		return 1, int64(i)*100 + 50
	}
	return 0, int64(i)*100 + 50
}

// hit looks up a segment picked at random and fails when it is not found.
func (f freshDB) hit(ctx context.Context, m *rs.PgManager, rng *rand.Rand) error {
	epoch, offset := f.hitAt(rng)
	_, ok, err := m.RemoteLogSegmentMetadata(ctx, f.tp, epoch, offset)
	if err == nil && !ok {
		err = fmt.Errorf("lookup of offset %d in epoch %d missed", offset, epoch)
	}
	return err
}

func benchmarkFreshReads(b *testing.B, f freshDB) {
	for _, clients := range []int{1, 8} {
		pool := rstest.NewPool(b, f.dsn, clients, false)
		m, err := rs.NewPgManager(b.Context(), pool)
		require.NoError(b, err)
		b.Cleanup(m.Close)
		queries := db.New()
		ops := []struct {
			name string
			op   func(ctx context.Context, rng *rand.Rand) error
		}{
			{"lookup hit", func(ctx context.Context, rng *rand.Rand) error { return f.hit(ctx, m, rng) }},
			// What the hit above spends where: the same call with a context
			// that cannot end (no statement goroutine, statement.go), and
			// its statement alone through the generated code.
			{"lookup hit, a context that cannot end", func(_ context.Context, rng *rand.Rand) error {
				return f.hit(context.Background(), m, rng)
			}},
			{"lookup hit, the statement alone", func(ctx context.Context, rng *rand.Rand) error {
				epoch, offset := f.hitAt(rng)
				_, err := queries.SegmentLookup(ctx, pool, db.SegmentLookupParams{
					TopicID: dbuuid.UUID(f.tp.TopicID), Partition: f.tp.Partition, Epoch: int32(epoch), LookupOffset: offset,
				})
				return err
			}},
			{"lookup miss", func(ctx context.Context, rng *rand.Rand) error {
				_, ok, err := m.RemoteLogSegmentMetadata(ctx, f.tp, 1, int64(rng.IntN(1900))*100+50)
				if err == nil && ok {
					err = fmt.Errorf("lookup hit")
				}
				return err
			}},
			{"raw primary-key SELECT", func(ctx context.Context, rng *rand.Rand) error {
				rows, err := pool.Query(ctx, "SELECT "+rawColumns+" FROM bench_raw WHERE topic_id = $1 AND partition = $2 AND segment_id = $3",
					dbuuid.UUID(f.tp.TopicID), f.tp.Partition, dbuuid.UUID(f.ids[rng.IntN(len(f.ids))]))
				if err != nil {
					return err
				}
				defer rows.Close()
				_, err = scanRaw(rows)
				return err
			}},
			{"list by epoch 1 (100 segments)", func(ctx context.Context, rng *rand.Rand) error {
				l, err := m.ListRemoteLogSegmentsByEpoch(ctx, f.tp, 1)
				if err == nil && len(l) != 100 {
					err = fmt.Errorf("listed %d", len(l))
				}
				return err
			}},
			{"raw range SELECT (100 rows)", func(ctx context.Context, rng *rand.Rand) error {
				rows, err := pool.Query(ctx, "SELECT "+rawColumns+" FROM bench_raw WHERE topic_id = $1 AND partition = $2 AND start_offset BETWEEN $3 AND $4 ORDER BY start_offset",
					dbuuid.UUID(f.tp.TopicID), f.tp.Partition, f.epoch1, f.epoch1+99*100)
				if err != nil {
					return err
				}
				defer rows.Close()
				n, err := scanRaw(rows)
				if err == nil && n != 100 {
					err = fmt.Errorf("raw range read %d rows", n)
				}
				return err
			}},
			{"remote log size epoch 1", func(ctx context.Context, rng *rand.Rand) error {
				_, err := m.RemoteLogSize(ctx, f.tp, 1)
				return err
			}},
			{"remote log size epoch 1, a context that cannot end", func(_ context.Context, rng *rand.Rand) error {
				_, err := m.RemoteLogSize(context.Background(), f.tp, 1)
				return err
			}},
			{"raw sum (100 rows)", func(ctx context.Context, rng *rand.Rand) error {
				var size int64
				return pool.QueryRow(ctx, "SELECT coalesce(sum(segment_size_bytes), 0)::bigint FROM bench_raw WHERE topic_id = $1 AND partition = $2 AND start_offset BETWEEN $3 AND $4",
					dbuuid.UUID(f.tp.TopicID), f.tp.Partition, f.epoch1, f.epoch1+99*100).Scan(&size)
			}},
		}
		for _, o := range ops {
			b.Run(fmt.Sprintf("%s/clients=%d", o.name, clients), func(b *testing.B) { parallel(b, clients, o.op) })
		}
	}
}

// benchmarkFreshWrites: an add and its COPY_SEGMENT_FINISHED per iteration,
// each client on its own partition, next to two raw single-row UPDATE
// commits; WAL bytes per iteration from pg_current_wal_lsn().
func benchmarkFreshWrites(b *testing.B, f freshDB) {
	admin := rstest.NewPool(b, f.dsn, 1, false)
	for _, clients := range []int{1, 8, 32} {
		pool := rstest.NewPool(b, f.dsn, clients, false)
		m, err := rs.NewPgManager(b.Context(), pool)
		require.NoError(b, err)
		b.Cleanup(m.Close)
		w := writeFloor{pool: pool, m: m, clients: clients, topic: uuid.New()}
		ops := []struct {
			name string
			op   func(ctx context.Context, rng *rand.Rand) error
		}{
			{"add + finish", func(ctx context.Context, rng *rand.Rand) error { return libraryAddFinish(ctx, &w, rng) }},
			{"two raw UPDATE commits", func(ctx context.Context, rng *rand.Rand) error {
				for range 2 {
					_, err := pool.Exec(ctx, "UPDATE bench_raw SET event_timestamp_ms = $4 WHERE topic_id = $1 AND partition = $2 AND segment_id = $3",
						dbuuid.UUID(f.tp.TopicID), f.tp.Partition, dbuuid.UUID(f.ids[rng.IntN(len(f.ids))]), rng.Int64())
					if err != nil {
						return err
					}
				}
				return nil
			}},
		}
		for _, o := range ops {
			b.Run(fmt.Sprintf("%s/clients=%d", o.name, clients), func(b *testing.B) {
				var before, after int64
				require.NoError(b, admin.QueryRow(b.Context(), "SELECT pg_current_wal_lsn() - '0/0'").Scan(&before))
				parallel(b, clients, o.op)
				b.StopTimer()
				require.NoError(b, admin.QueryRow(b.Context(), "SELECT pg_current_wal_lsn() - '0/0'").Scan(&after))
				b.ReportMetric(float64(after-before)/float64(b.N), "WAL-B/op")
			})
		}
	}
}

// benchmarkFreshness: commit on broker A to the write being in broker B's
// cache (read from B's memory, no round trip, no CaughtUp to wake its follower),
// while 8 other writers keep committing to other partitions.
func benchmarkFreshness(b *testing.B, f freshDB) {
	ctx := b.Context()
	a, err := rs.NewPgManager(ctx, rstest.NewPool(b, f.dsn, 2, false))
	require.NoError(b, err)
	b.Cleanup(a.Close)
	reader, err := rs.NewPgManager(ctx, rstest.NewPool(b, f.dsn, 2, false), rs.WithCache())
	require.NoError(b, err)
	b.Cleanup(reader.Close)
	tp := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "fresh", Partition: 0}
	require.NoError(b, reader.OnPartitionLeadershipChanges(ctx, nil, []rs.TopicIDPartition{tp}))
	rstest.WaitLoaded(b, reader, tp)

	load, err := rs.NewPgManager(ctx, rstest.NewPool(b, f.dsn, 8, false))
	require.NoError(b, err)
	b.Cleanup(load.Close)
	loadCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			other := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "load", Partition: int32(w)}
			for i := int64(0); loadCtx.Err() == nil; i++ {
				s := rstest.Segment(other, i*100, i*100+99, map[rs.LeaderEpoch]int64{0: i * 100})
				if load.AddRemoteLogSegmentMetadata(loadCtx, s) == nil {
					_ = load.UpdateRemoteLogSegmentMetadata(loadCtx, rstest.Update(s, rs.CopySegmentFinished))
				}
			}
		})
	}
	defer func() { stop(); wg.Wait() }()

	var lags []time.Duration
	i := int64(0)
	for b.Loop() {
		s := rstest.Segment(tp, i*100, i*100+99, map[rs.LeaderEpoch]int64{0: i * 100})
		i++
		require.NoError(b, a.AddRemoteLogSegmentMetadata(ctx, s))
		require.NoError(b, a.UpdateRemoteLogSegmentMetadata(ctx, rstest.Update(s, rs.CopySegmentFinished)))
		lags = append(lags, lagUntilCached(b, reader, s))
	}
	slices.Sort(lags)
	b.ReportMetric(float64(lags[len(lags)/2].Microseconds()), "p50-lag-µs")
	b.ReportMetric(float64(lags[len(lags)*99/100].Microseconds()), "p99-lag-µs")
}
