package bench_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/db"
	"github.com/krabka/remotestorage/internal/dbuuid"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/rstest"
)

// BenchmarkRacedUpdates measures updates racing on one segment: each round
// finishes a new segment (untimed), then releases clients workers at once,
// one asking for DELETE_SEGMENT_STARTED and the others for
// DELETE_SEGMENT_FINISHED. A DELETE_SEGMENT_FINISHED that waited for the
// DELETE_SEGMENT_STARTED's lock is applied after it and must succeed.
//
//   - library: UpdateRemoteLogSegmentMetadata, which runs the statement
//     again when it refused on a state the segment had left;
//   - one statement: SegmentUpdate sent once and taken as it answers, as the
//     library did before it ran a refused statement again;
//   - raw UPDATE commits: the bound, one raw single-row UPDATE commit per
//     worker, all on one row.
//
// Reported per round: statements/update (the pool's, counted by a tracer),
// wrong-refusals/round (refusals whose found state allows the update: a
// write applied after the lock holder and refused on the state before it),
// retried/round (updates that took a second statement).
//
//	go test -run '^$' -bench '^BenchmarkRacedUpdates$' -benchtime 2000x ./bench
func BenchmarkRacedUpdates(b *testing.B) {
	for _, clients := range []int{2, 8} {
		dsn := pgtest.NewDatabase(b)
		_, err := rstest.NewPool(b, dsn, 1, false).Exec(b.Context(), `
CREATE TABLE bench_raw (id integer PRIMARY KEY, event_timestamp_ms bigint NOT NULL, pad text NOT NULL);
INSERT INTO bench_raw SELECT g, 0, repeat('x', 150) FROM generate_series(0, 1999) g;`)
		require.NoError(b, err)
		for _, v := range []string{"raw UPDATE commits", "one statement", "library"} {
			b.Run(fmt.Sprintf("%s/clients=%d", v, clients), func(b *testing.B) { runRacedUpdates(b, dsn, clients, v) })
		}
	}
}

func runRacedUpdates(b *testing.B, dsn string, clients int, variant string) {
	ctx := b.Context()
	pool, counter := countedPool(b, dsn, clients+1)
	m, err := rs.NewPgManager(ctx, pool)
	require.NoError(b, err)
	b.Cleanup(m.Close)
	queries := db.New()
	tp := rstest.TP(int32(clients))

	// update is worker w's call on s: whether it was refused, and whether
	// the refusal named a state that allows the update.
	update := func(w int, s rs.RemoteLogSegmentMetadata, round int) (refused, wrong bool, err error) {
		to := rs.DeleteSegmentFinished
		if w == 0 {
			to = rs.DeleteSegmentStarted
		}
		allowed := rs.AllowedSegmentFromStates(to)
		switch variant {
		case "raw UPDATE commits":
			_, err = pool.Exec(ctx, "UPDATE bench_raw SET event_timestamp_ms = $2 WHERE id = $1", round%2000, w)
			return false, false, err
		case "one statement":
			codes := make([]int16, len(allowed))
			for i, st := range allowed {
				codes[i] = int16(st)
			}
			row, err := queries.SegmentUpdate(ctx, pool, db.SegmentUpdateParams{
				TopicID: dbuuid.UUID(tp.TopicID), Partition: tp.Partition, SegmentID: dbuuid.UUID(s.SegmentID.ID),
				State: int16(to), BrokerID: int32(w), EventTimestampMs: 1, Allowed: codes, Finishing: false,
			})
			if err != nil || row.UpdatedVersion >= 0 {
				return false, false, err
			}
			return true, slices.Contains(codes, row.CurrentState), nil
		}
		err = m.UpdateRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadataUpdate{SegmentID: s.SegmentID, State: to, BrokerID: int32(w), EventTimestampMs: 1})
		if !errors.Is(err, rs.ErrInvalidSegmentTransition) {
			return false, false, err
		}
		found, _ := rs.SegmentStateFound(err)
		return true, slices.Contains(allowed, found), nil
	}

	type result struct{ refused, wrong bool }
	starts := make([]chan rs.RemoteLogSegmentMetadata, clients)
	results := make(chan result, clients)
	errs := make(chan error, clients)
	round := 0
	for w := range clients {
		starts[w] = make(chan rs.RemoteLogSegmentMetadata)
		go func() {
			for s := range starts[w] {
				refused, wrong, err := update(w, s, round)
				if err != nil {
					errs <- err
				}
				results <- result{refused, wrong}
			}
		}()
	}
	defer func() {
		for _, c := range starts {
			close(c)
		}
	}()

	var wrong, refused, statements, updates int64
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		round = i
		s := rstest.WriteFinished(b, m, tp, int64(i)*100, int64(i)*100+99)
		counter.Take()
		b.StartTimer()
		for _, c := range starts {
			c <- s
		}
		for range clients {
			r := <-results
			if r.refused {
				refused++
			}
			if r.wrong {
				wrong++
			}
		}
		b.StopTimer()
		n, _ := counter.Take()
		statements += n
		updates += int64(clients)
		select {
		case err := <-errs:
			b.Fatal(err)
		default:
		}
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(statements)/float64(updates), "statements/update")
	b.ReportMetric(float64(refused)/float64(b.N), "refusals/round")
	b.ReportMetric(float64(wrong)/float64(b.N), "wrong-refusals/round")
	if variant == "library" {
		b.ReportMetric(float64(statements-updates)/float64(b.N), "retried/round")
	}
}
