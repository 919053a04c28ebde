package bench_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
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

// The scale of BenchmarkMonthOfChurn; go test … -args -month.rounds=10 runs
// a short one.
var (
	monthPartitions = flag.Int("month.partitions", 200, "BenchmarkMonthOfChurn: partitions")
	monthLive       = flag.Int("month.live", 24, "BenchmarkMonthOfChurn: live segments each partition keeps")
	monthRounds     = flag.Int("month.rounds", 150, "BenchmarkMonthOfChurn: rounds of churn (one segment rolled per partition a round)")
	monthRetention  = flag.Duration("month.retention", 5*time.Second, "BenchmarkMonthOfChurn: WithForgottenRetention")
	monthClients    = flag.Int("month.clients", 8, "BenchmarkMonthOfChurn: clients (writers and readers)")
)

// BenchmarkMonthOfChurn is a month of Kafka retention, scaled down, with
// autovacuum at the server's defaults and the library's background purge at
// a short retention. A cluster of 10,000 partitions that rolls a segment a
// partition an hour forgets 240,000 segments a day, 7.2 million a month (720
// rolls a partition). Here (the defaults) 200 partitions each keep 24 live
// segments while 150 rounds each roll one segment a partition: an add and
// its COPY_SEGMENT_FINISHED, then the oldest live segment's
// DELETE_SEGMENT_STARTED and DELETE_SEGMENT_FINISHED. That is about 30,000
// forgotten segments, the month's scaled by 1/240 (the partitions by 1/50,
// each partition's 720 rolls by 1/4.8: six days and six hours of them). The purge runs in the background of the
// writers' manager (WithForgottenRetention, 5 s by default, so that a few
// rounds' worth of forgotten rows wait for it, as a week's worth waits at
// the default retention). Nothing else is tuned: no manual VACUUM or
// ANALYZE; the server's settings, the tables' size after each quarter of
// the churn and what autovacuum did are logged.
//
// Measured at the start (after the live segments are written) and at the
// end, each next to the raw statement in the same phase, interleaved in
// four turns to share the machine's noise:
//
//   - kB: the rlmm_ tables' size with their indexes and TOAST
//     (pg_total_relation_size), and growth, end ÷ start (the start is
//     freshly written: no dead tuples, no forgotten rows); growth-after-q1
//     is the size after the churn ÷ the size after its first quarter;
//
//   - add+finish-µs: wall time ÷ adds and finishes at month.clients clients,
//     each on partitions of its own; add+finish-of-raw: two raw single-row
//     UPDATE commits (BenchmarkWriteFloor's baseline) ÷ the library's;
//
//   - lookup-µs: wall time ÷ lookup hits of random live segments;
//     lookup-of-raw: a raw primary-key SELECT of the same number of rows,
//     from a table of the live segments built for the phase, ÷ the
//     library's.
//
//     go test -run '^$' -bench '^BenchmarkMonthOfChurn$' -benchtime 1x -timeout 30m ./bench
//     go test -run '^$' -bench '^BenchmarkMonthOfChurn$' -benchtime 1x ./bench -args -month.rounds=10
func BenchmarkMonthOfChurn(b *testing.B) {
	for b.Loop() {
		monthOfChurn(b)
	}
}

// monthPartition is one partition's state on the client side: its live
// segments, oldest first. One writer owns it.
type monthPartition struct {
	tp   rs.TopicIDPartition
	live []rs.RemoteLogSegmentMetadata
	next int64
}

type monthRun struct {
	b       *testing.B
	pool    *pgxpool.Pool
	m       *rs.PgManager
	parts   []*monthPartition
	clients int
	startKB float64 // the tables' size at the start
	forgot  atomic.Int64
}

func monthOfChurn(b *testing.B) {
	ctx := b.Context()
	dsn := pgtest.NewDatabase(b)
	clients := *monthClients
	cfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(b, err)
	cfg.MaxConns = int32(clients + 1) // one more for the background purge
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(b, err)
	defer pool.Close()
	_, err = pool.Exec(ctx, `
CREATE TABLE bench_raw (id integer PRIMARY KEY, event_timestamp_ms bigint NOT NULL, pad text NOT NULL);
INSERT INTO bench_raw SELECT g, 0, repeat('x', 150) FROM generate_series(0, 1999) g;`)
	require.NoError(b, err)
	monthLogSettings(b, pool)
	m, err := rs.NewPgManager(ctx, pool, rs.WithForgottenRetention(*monthRetention))
	require.NoError(b, err)
	defer m.Close()

	r := monthRun{b: b, pool: pool, m: m, clients: clients}
	topic := uuid.New()
	for p := range *monthPartitions {
		r.parts = append(r.parts, &monthPartition{tp: rs.TopicIDPartition{TopicID: topic, Topic: "month", Partition: int32(p)}})
	}
	// The live window, then the start's figures.
	r.churn(*monthLive, false)
	r.phase("start")

	// The churn, in quarters, with the tables' size after each.
	start := time.Now()
	var sizes []string
	var firstQuarter int64
	for q := range 4 {
		r.churn((q+1)**monthRounds/4-q**monthRounds/4, true)
		size := monthSize(b, pool)
		if q == 0 {
			firstQuarter = size
		}
		sizes = append(sizes, fmt.Sprintf("%d kB", size/1024))
	}
	elapsed := time.Since(start)
	// From a quarter in, the tables hold what the retention and autovacuum's
	// pace keep; growth after that is growth with history.
	b.ReportMetric(float64(monthSize(b, pool))/float64(firstQuarter), "growth-after-q1")
	b.Logf("size after each quarter of the churn: %s", strings.Join(sizes, ", "))
	b.ReportMetric(float64(r.forgot.Load()), "forgotten")
	b.ReportMetric(float64(*monthRounds)/elapsed.Seconds(), "rounds/s")
	r.phase("end")

	b.ReportMetric(float64(m.PurgedSegments()), "purged")
	b.Logf("churn: %d partitions × %d rounds in %s (%.1f rounds/s; a retention of %s is about %.0f rounds)",
		len(r.parts), *monthRounds, elapsed.Round(time.Millisecond), float64(*monthRounds)/elapsed.Seconds(),
		*monthRetention, monthRetention.Seconds()*float64(*monthRounds)/elapsed.Seconds())
	monthLogTableStats(b, pool)
	// Every partition still lists exactly its live window.
	for _, p := range r.parts[:min(len(r.parts), 10)] {
		list, err := m.ListRemoteLogSegments(ctx, p.tp)
		require.NoError(b, err)
		require.Len(b, list, len(p.live), "partition %d", p.tp.Partition)
	}
}

// churn runs rounds rounds, each client over the partitions it owns: an add
// and its finish, then, with forget, the oldest live segment's delete
// started and finished while more than month.live are live.
func (r *monthRun) churn(rounds int, forget bool) {
	r.eachClient(func(ctx context.Context, c int) error {
		for range rounds {
			for p := c; p < len(r.parts); p += r.clients {
				if err := r.addFinish(ctx, r.parts[p]); err != nil {
					return err
				}
				if forget {
					if err := r.forgetOldest(ctx, r.parts[p]); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
}

func (r *monthRun) addFinish(ctx context.Context, p *monthPartition) error {
	s := rstest.Segment(p.tp, p.next*100, p.next*100+99, map[rs.LeaderEpoch]int64{0: p.next * 100})
	p.next++
	if err := r.m.AddRemoteLogSegmentMetadata(ctx, s); err != nil {
		return err
	}
	if err := r.m.UpdateRemoteLogSegmentMetadata(ctx, rstest.Update(s, rs.CopySegmentFinished)); err != nil {
		return err
	}
	p.live = append(p.live, s)
	return nil
}

func (r *monthRun) forgetOldest(ctx context.Context, p *monthPartition) error {
	for len(p.live) > *monthLive {
		s := p.live[0]
		for _, st := range []rs.RemoteLogSegmentState{rs.DeleteSegmentStarted, rs.DeleteSegmentFinished} {
			if err := r.m.UpdateRemoteLogSegmentMetadata(ctx, rstest.Update(s, st)); err != nil {
				return err
			}
		}
		p.live = p.live[1:]
		r.forgot.Add(1)
	}
	return nil
}

// eachClient runs f on r.clients goroutines and fails the benchmark with
// their errors.
func (r *monthRun) eachClient(f func(ctx context.Context, c int) error) {
	errs := make([]error, r.clients)
	var wg sync.WaitGroup
	for c := range r.clients {
		wg.Go(func() { errs[c] = f(r.b.Context(), c) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(r.b, err)
	}
}

// timed runs n calls of op spread over the clients and returns the wall
// time.
func (r *monthRun) timed(n int, op func(ctx context.Context, c int, rng *rand.Rand) error) time.Duration {
	var left atomic.Int64
	left.Store(int64(n))
	start := time.Now()
	r.eachClient(func(ctx context.Context, c int) error {
		rng := rand.New(rand.NewPCG(rand.Uint64(), uint64(c)))
		for left.Add(-1) >= 0 {
			if err := op(ctx, c, rng); err != nil {
				return err
			}
		}
		return nil
	})
	return time.Since(start)
}

// phase measures and reports the phase's figures (see BenchmarkMonthOfChurn).
func (r *monthRun) phase(name string) {
	const turns, writes, lookups = 4, 100, 1_000 // writes and lookups a turn
	ctx := r.b.Context()
	b := r.b
	kB := float64(monthSize(b, r.pool)) / 1024
	b.ReportMetric(kB, name+"-kB")
	if r.startKB == 0 {
		r.startKB = kB
	} else {
		b.ReportMetric(kB/r.startKB, "growth")
	}

	// The raw primary-key table: the live segments, as rows of the same
	// columns a segment has, keyed by id.
	_, err := r.pool.Exec(ctx, `DROP TABLE IF EXISTS bench_raw_seg;
CREATE TABLE bench_raw_seg (topic_id uuid, partition integer, segment_id uuid, topic text, start_offset bigint,
    end_offset bigint, max_timestamp_ms bigint, broker_id integer, event_timestamp_ms bigint, segment_size_bytes bigint,
    custom_metadata bytea, state smallint, txn_index_empty boolean, epochs integer[], epoch_start_offsets bigint[],
    created_at timestamptz, updated_at timestamptz, PRIMARY KEY (topic_id, partition, segment_id))`)
	require.NoError(b, err)
	var live []rs.RemoteLogSegmentMetadata
	var rows [][]any
	for _, p := range r.parts {
		for _, s := range p.live {
			live = append(live, s)
			rows = append(rows, []any{dbuuid.UUID(s.SegmentID.TopicIDPartition.TopicID), s.SegmentID.TopicIDPartition.Partition,
				dbuuid.UUID(s.SegmentID.ID), "month", s.StartOffset, s.EndOffset, s.MaxTimestampMs, int32(1), int64(1),
				int64(s.SegmentSizeInBytes), []byte(nil), int16(1), true, []int32{0}, []int64{s.StartOffset}, time.Now(), time.Now()})
		}
	}
	_, err = r.pool.CopyFrom(ctx, pgx.Identifier{"bench_raw_seg"}, []string{"topic_id", "partition", "segment_id", "topic",
		"start_offset", "end_offset", "max_timestamp_ms", "broker_id", "event_timestamp_ms", "segment_size_bytes",
		"custom_metadata", "state", "txn_index_empty", "epochs", "epoch_start_offsets", "created_at", "updated_at"}, pgx.CopyFromRows(rows))
	require.NoError(b, err)
	_, err = r.pool.Exec(ctx, "ANALYZE bench_raw_seg")
	require.NoError(b, err)

	var libWrite, rawWrite, libLookup, rawLookup time.Duration
	for range turns {
		// Each client writes to the partitions it owns, in turn.
		turn := make([]int, r.clients)
		libWrite += r.timed(writes, func(ctx context.Context, c int, _ *rand.Rand) error {
			p := c + turn[c]*r.clients
			if p >= len(r.parts) {
				turn[c], p = 0, c
			}
			turn[c]++
			return r.addFinish(ctx, r.parts[p])
		})
		rawWrite += r.timed(writes, func(ctx context.Context, _ int, rng *rand.Rand) error {
			for range 2 {
				if _, err := r.pool.Exec(ctx, "UPDATE bench_raw SET event_timestamp_ms = $2 WHERE id = $1", rng.IntN(2000), rng.Int64()); err != nil {
					return err
				}
			}
			return nil
		})
		libLookup += r.timed(lookups, func(ctx context.Context, _ int, rng *rand.Rand) error {
			s := live[rng.IntN(len(live))]
			_, ok, err := r.m.RemoteLogSegmentMetadata(ctx, s.SegmentID.TopicIDPartition, 0, s.StartOffset+50)
			if err == nil && !ok {
				err = fmt.Errorf("lookup of %s missed", s.SegmentID.ID)
			}
			return err
		})
		rawLookup += r.timed(lookups, func(ctx context.Context, _ int, rng *rand.Rand) error {
			s := live[rng.IntN(len(live))]
			rows, err := r.pool.Query(ctx, `SELECT topic_id, partition, segment_id, topic, start_offset, end_offset, max_timestamp_ms,
    broker_id, event_timestamp_ms, segment_size_bytes, custom_metadata, state, txn_index_empty, epochs, epoch_start_offsets,
    created_at, updated_at FROM bench_raw_seg WHERE topic_id = $1 AND partition = $2 AND segment_id = $3`,
				dbuuid.UUID(s.SegmentID.TopicIDPartition.TopicID), s.SegmentID.TopicIDPartition.Partition, dbuuid.UUID(s.SegmentID.ID))
			if err != nil {
				return err
			}
			n := 0
			for rows.Next() {
				var (
					topicID, segmentID               dbuuid.UUID
					partition, broker                int32
					topic                            string
					start, end, maxTs, eventTs, size int64
					custom                           []byte
					state                            int16
					txnEmpty                         bool
					epochs                           []int32
					epochStarts                      []int64
					createdAt, updatedAt             time.Time
				)
				if err := rows.Scan(&topicID, &partition, &segmentID, &topic, &start, &end, &maxTs, &broker, &eventTs, &size,
					&custom, &state, &txnEmpty, &epochs, &epochStarts, &createdAt, &updatedAt); err != nil {
					return err
				}
				n++
			}
			if err := rows.Err(); err != nil {
				return err
			}
			if n != 1 {
				return fmt.Errorf("raw lookup of %s read %d rows", s.SegmentID.ID, n)
			}
			return nil
		})
	}
	us := func(d time.Duration, n int) float64 { return float64(d.Microseconds()) / float64(n) }
	b.ReportMetric(us(libWrite, turns*writes), name+"-add+finish-µs")
	b.ReportMetric(float64(rawWrite)/float64(libWrite), name+"-add+finish-of-raw")
	b.ReportMetric(us(libLookup, turns*lookups), name+"-lookup-µs")
	b.ReportMetric(float64(rawLookup)/float64(libLookup), name+"-lookup-of-raw")
	b.Logf("%s: %.0f kB; add+finish %.0f µs (raw two UPDATE commits %.0f µs); lookup hit %.0f µs (raw primary-key SELECT %.0f µs); %d live segments",
		name, kB, us(libWrite, turns*writes), us(rawWrite, turns*writes), us(libLookup, turns*lookups), us(rawLookup, turns*lookups), len(live))
}

// monthSize is the rlmm_ tables' size, with indexes and TOAST.
func monthSize(b *testing.B, pool *pgxpool.Pool) int64 {
	var n int64
	require.NoError(b, pool.QueryRow(b.Context(), `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
FROM pg_class c WHERE c.relkind IN ('r', 'p') AND c.relname LIKE 'rlmm\_%' AND c.relnamespace = current_schema()::regnamespace`).Scan(&n))
	return n
}

// monthLogSettings logs the server's version and the settings that bear on
// the run: durability and autovacuum.
func monthLogSettings(b *testing.B, pool *pgxpool.Pool) {
	rows, err := pool.Query(b.Context(), `SELECT name, setting || coalesce(unit, '') FROM pg_settings
WHERE name IN ('server_version', 'fsync', 'synchronous_commit', 'full_page_writes', 'shared_buffers', 'max_wal_size',
    'checkpoint_timeout') OR name LIKE 'autovacuum%' ORDER BY name`)
	require.NoError(b, err)
	settings, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
		var name, value string
		err := row.Scan(&name, &value)
		return name + "=" + value, err
	})
	require.NoError(b, err)
	b.Logf("server: %s", strings.Join(settings, " "))
}

// monthLogTableStats logs what autovacuum did to the rlmm_ tables, and
// their live and dead tuples.
func monthLogTableStats(b *testing.B, pool *pgxpool.Pool) {
	rows, err := pool.Query(b.Context(), `SELECT relname, n_live_tup, n_dead_tup, autovacuum_count, autoanalyze_count
FROM pg_stat_user_tables WHERE relname LIKE 'rlmm\_%' AND relname NOT LIKE 'rlmm\_goose%'
    AND n_live_tup + n_dead_tup + autovacuum_count + autoanalyze_count > 0 ORDER BY relname`)
	require.NoError(b, err)
	stats, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
		var name string
		var live, dead, vacuums, analyzes int64
		err := row.Scan(&name, &live, &dead, &vacuums, &analyzes)
		return fmt.Sprintf("%s %d live, %d dead, %d autovacuums, %d autoanalyzes", name, live, dead, vacuums, analyzes), err
	})
	require.NoError(b, err)
	b.Logf("tables at the end: %s", strings.Join(stats, "; "))
}
