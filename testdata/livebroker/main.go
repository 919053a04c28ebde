// Command livebroker is built by TestMigrationsUnderLiveBrokers inside a
// copy of an older commit of this module: brokers running that commit's
// code, in a process of their own, while the test migrates the database
// under them with the current code. It uses only the API every schema since
// the first has had.
//
// Usage: livebroker -dsn DSN -brokers N. Each broker writes and reads its
// own partition as fast as it can: add a segment, finish it, look an offset
// of it up, list the partition. Every 50 segments the leader epoch moves
// on. The driver prints one JSON line per failed call and one progress line
// (the total of rounds) whenever a round completes a multiple of 10; it
// stops when its standard input closes, then prints each partition and the
// highest finished end offset of each epoch, and exits.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	rs "github.com/krabka/remotestorage"
)

// line is one line of output.
type line struct {
	Broker    int              `json:"broker"`
	Op        string           `json:"op,omitempty"`
	Err       string           `json:"err,omitempty"`
	Code      string           `json:"code,omitempty"`
	Rounds    int64            `json:"rounds,omitempty"`
	TopicID   string           `json:"topic_id,omitempty"`
	Partition int32            `json:"partition,omitempty"`
	EpochEnds map[string]int64 `json:"epoch_ends,omitempty"`
	Done      bool             `json:"done,omitempty"`
}

const epochEvery = 50

func main() {
	dsn := flag.String("dsn", "", "database URL")
	brokers := flag.Int("brokers", 2, "brokers, each with a pool and a partition of its own")
	flag.Parse()

	var (
		outMu  sync.Mutex
		enc    = json.NewEncoder(os.Stdout)
		rounds atomic.Int64
		stop   = make(chan struct{})
	)
	emit := func(l line) {
		outMu.Lock()
		defer outMu.Unlock()
		_ = enc.Encode(l)
	}
	fail := func(b int, op string, err error) {
		l := line{Broker: b, Op: op, Err: err.Error()}
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			l.Code = pgErr.Code
		}
		emit(l)
	}
	go func() {
		_, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin))
		close(stop)
	}()

	ctx := context.Background()
	var wg sync.WaitGroup
	results := make([]line, *brokers)
	for b := range *brokers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pool, err := pgxpool.New(ctx, *dsn)
			if err != nil {
				fail(b, "pool", err)
				return
			}
			defer pool.Close()
			m, err := rs.NewPgManager(ctx, pool)
			if err != nil {
				fail(b, "start", err)
				return
			}
			defer m.Close()
			tp := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "live", Partition: int32(b)}
			ends := map[string]int64{}
			defer func() {
				results[b] = line{Broker: b, TopicID: tp.TopicID.String(), Partition: tp.Partition, EpochEnds: ends}
			}()
			for i := int64(0); ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				epoch := rs.LeaderEpoch(i / epochEvery)
				s := rs.RemoteLogSegmentMetadata{
					SegmentID:           rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.New()},
					StartOffset:         i * 10,
					EndOffset:           i*10 + 9,
					MaxTimestampMs:      i,
					SegmentSizeInBytes:  1024,
					State:               rs.CopySegmentStarted,
					SegmentLeaderEpochs: map[rs.LeaderEpoch]int64{epoch: i * 10},
					TxnIndexEmpty:       true,
				}
				if err := m.AddRemoteLogSegmentMetadata(ctx, s); err != nil {
					fail(b, "add", err)
					continue
				}
				u := rs.RemoteLogSegmentMetadataUpdate{SegmentID: s.SegmentID, State: rs.CopySegmentFinished, BrokerID: int32(b), EventTimestampMs: i}
				if err := m.UpdateRemoteLogSegmentMetadata(ctx, u); err != nil {
					fail(b, "finish", err)
					continue
				}
				ends[fmt.Sprint(epoch)] = s.EndOffset
				got, found, err := m.RemoteLogSegmentMetadata(ctx, tp, epoch, i*10+5)
				if err != nil {
					fail(b, "lookup", err)
					continue
				}
				if !found || got.SegmentID != s.SegmentID {
					fail(b, "lookup", fmt.Errorf("offset %d of epoch %d: found %v, segment %v, want %v", i*10+5, epoch, found, got.SegmentID.ID, s.SegmentID.ID))
					continue
				}
				if i%10 == 0 {
					list, err := m.ListRemoteLogSegments(ctx, tp)
					if err != nil {
						fail(b, "list", err)
						continue
					}
					if int64(len(list)) > i+1 || len(list) == 0 || list[len(list)-1].SegmentID != s.SegmentID {
						fail(b, "list", fmt.Errorf("%d segments, the last %v; want at most %d, the last %v", len(list), list[len(list)-1].SegmentID.ID, i+1, s.SegmentID.ID))
						continue
					}
				}
				if n := rounds.Add(1); n%10 == 0 {
					emit(line{Broker: -1, Rounds: n})
				}
			}
		}()
	}
	wg.Wait()
	for _, r := range results {
		if r.TopicID != "" {
			emit(r)
		}
	}
	emit(line{Broker: -1, Rounds: rounds.Load(), Done: true})
}
