package bench_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/db"
	"github.com/krabka/remotestorage/internal/dbuuid"
	"github.com/krabka/remotestorage/internal/rstest"
	"github.com/krabka/remotestorage/internal/testwait"
)

// BenchmarkReplicaCommitToCaughtUp measures the replica's staleness under a
// write load: the time from a commit on the primary until CaughtUp, reading
// from the standby, says true.
//
//	go test -run '^$' -bench ReplicaCommitToCaughtUp ./bench
func BenchmarkReplicaCommitToCaughtUp(b *testing.B) {
	primary, standby, _ := rstest.PrimaryAndStandby(b)
	m, err := rs.NewPgManager(b.Context(), primary, rs.WithReadReplica(standby))
	require.NoError(b, err)
	measureCommitToCaughtUp(b, m, m, rstest.TP(0))
}

// BenchmarkReplicaCaughtUpUnderWrites measures, on a healthy standby while
// 8 brokers (each a manager over a pool of its own) write add + finish
// continuously to a partition each on the primary, how often CaughtUp is
// true for a quiet partition, written once before the writers started, and
// how long it takes. Each iteration also sends CaughtUp's two statements
// raw (ReplicaSnapshot on the standby, then PartitionReplicaBehind on the
// primary), and the two raw statements of the question CaughtUp asked
// before it answered per partition: the primary's WAL insert position, then
// the standby's replay position, true when the standby has reached it (one
// round trip to each side, as CaughtUp: they bound its latency). The three
// go in turns, each first in one iteration of three.
//
//	go test -run '^$' -bench ReplicaCaughtUpUnderWrites -benchtime 3000x ./bench
func BenchmarkReplicaCaughtUpUnderWrites(b *testing.B) {
	const writers = 8
	ctx := b.Context()
	primary, standby, _ := rstest.PrimaryAndStandby(b)
	m, err := rs.NewPgManager(ctx, primary, rs.WithReadReplica(standby))
	require.NoError(b, err)
	b.Cleanup(m.Close)
	quiet := rstest.TP(0)
	rstest.WriteFinished(b, m, quiet, 0, 99)
	testwait.Until(b, "the quiet partition caught up", func() bool {
		ok, err := m.CaughtUp(ctx, quiet)
		require.NoError(b, err)
		return ok
	})
	q := db.New()
	statements := func() bool {
		r, err := q.ReplicaSnapshot(ctx, standby, db.ReplicaSnapshotParams{TopicID: dbuuid.UUID(quiet.TopicID), Partition: quiet.Partition})
		require.NoError(b, err)
		behind, err := q.PartitionReplicaBehind(ctx, primary, db.PartitionReplicaBehindParams{
			TopicID: dbuuid.UUID(quiet.TopicID), Partition: quiet.Partition,
			Snapshot: r.Snapshot, Seen: r.Seen, DeleteVersion: r.DeleteVersion, Generation: r.Generation,
		})
		require.NoError(b, err)
		return !behind
	}
	wal := func() bool {
		var insert, replay int64
		require.NoError(b, primary.QueryRow(ctx, "SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint").Scan(&insert))
		require.NoError(b, standby.QueryRow(ctx, `SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()
			ELSE pg_current_wal_insert_lsn() END - '0/0'::pg_lsn)::bigint`).Scan(&replay))
		return replay >= insert
	}
	measures := []struct {
		name  string
		ask   func() bool
		trues int
		times []time.Duration
	}{
		{name: "caughtup", ask: func() bool {
			ok, err := m.CaughtUp(ctx, quiet)
			require.NoError(b, err)
			return ok
		}},
		{name: "statements", ask: statements},
		{name: "wal", ask: wal},
	}

	brokers, _ := rstest.BrokersOn(b, primary.Config().ConnString(), writers)
	writeCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var written atomic.Int64
	failed := make(chan error, writers)
	for i, w := range brokers {
		tp := rstest.TP(int32(i + 1))
		wg.Go(func() {
			for j := int64(0); writeCtx.Err() == nil; j++ {
				s := rstest.Segment(tp, j*100, j*100+99, map[rs.LeaderEpoch]int64{0: j * 100})
				err := w.AddRemoteLogSegmentMetadata(writeCtx, s)
				if err == nil {
					err = w.UpdateRemoteLogSegmentMetadata(writeCtx, rstest.Update(s, rs.CopySegmentFinished))
				}
				if err != nil {
					if writeCtx.Err() == nil {
						failed <- err
					}
					return
				}
				written.Add(1)
			}
		})
	}
	testwait.Until(b, "the writers at their pace", func() bool {
		require.Empty(b, failed, "a writer failed")
		return written.Load() >= 10*writers
	})

	start, writtenBefore := time.Now(), written.Load()
	i := 0
	for b.Loop() {
		for k := range measures {
			me := &measures[(i+k)%len(measures)]
			t := time.Now()
			ok := me.ask()
			me.times = append(me.times, time.Since(t))
			if ok {
				me.trues++
			}
		}
		i++
	}
	elapsed, writes := time.Since(start), written.Load()-writtenBefore
	stop()
	wg.Wait()
	close(failed)
	for err := range failed {
		require.NoError(b, err, "a writer failed")
	}
	b.ReportMetric(float64(writes)/elapsed.Seconds(), "add+finish/s")
	for _, me := range measures {
		slices.Sort(me.times)
		n := len(me.times)
		b.ReportMetric(100*float64(me.trues)/float64(n), me.name+"-true-%")
		b.ReportMetric(float64(me.times[n/2].Microseconds()), me.name+"-p50-µs")
		b.ReportMetric(float64(me.times[n*99/100].Microseconds()), me.name+"-p99-µs")
	}
}
