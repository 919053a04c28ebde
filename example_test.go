package remotestorage_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	rs "github.com/krabka/remotestorage"
)

// A segment's life, from upload to deletion, and the lookups a fetch makes.
func Example() {
	ctx := context.Background()
	var m rs.RemoteLogMetadataManager = rs.NewInMemoryManager()

	tp := rs.TopicIDPartition{TopicID: uuid.MustParse("6fd630dd-c4fb-4485-aaad-5347f29cf952"), Topic: "orders", Partition: 0}
	seg := rs.RemoteLogSegmentMetadata{
		SegmentID:           rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.New()},
		StartOffset:         0,
		EndOffset:           99,
		SegmentSizeInBytes:  1 << 20,
		State:               rs.CopySegmentStarted,
		SegmentLeaderEpochs: map[rs.LeaderEpoch]int64{0: 0, 1: 60}, // a leadership change at offset 60
		TxnIndexEmpty:       true,
	}
	if err := m.AddRemoteLogSegmentMetadata(ctx, seg); err != nil {
		panic(err)
	}
	// Not visible to lookups until the copy has finished.
	_, found, _ := m.RemoteLogSegmentMetadata(ctx, tp, 1, 70)
	fmt.Println("before COPY_SEGMENT_FINISHED:", found)

	finished := rs.RemoteLogSegmentMetadataUpdate{SegmentID: seg.SegmentID, State: rs.CopySegmentFinished, BrokerID: 1}
	if err := m.UpdateRemoteLogSegmentMetadata(ctx, finished); err != nil {
		panic(err)
	}
	got, found, _ := m.RemoteLogSegmentMetadata(ctx, tp, 1, 70)
	fmt.Println("offset 70 of epoch 1:", found, got.State)
	_, found, _ = m.RemoteLogSegmentMetadata(ctx, tp, 0, 70)
	fmt.Println("offset 70 of epoch 0:", found)
	highest, _, _ := m.HighestOffsetForEpoch(ctx, tp, 0)
	fmt.Println("highest offset of epoch 0:", highest)

	// A copy cannot finish again once deletion has started.
	deleting := rs.RemoteLogSegmentMetadataUpdate{SegmentID: seg.SegmentID, State: rs.DeleteSegmentStarted, BrokerID: 1}
	_ = m.UpdateRemoteLogSegmentMetadata(ctx, deleting)
	err := m.UpdateRemoteLogSegmentMetadata(ctx, finished)
	fmt.Println("finish after delete started:", errors.Is(err, rs.ErrInvalidSegmentTransition))
	// Output:
	// before COPY_SEGMENT_FINISHED: false
	// offset 70 of epoch 1: true COPY_SEGMENT_FINISHED
	// offset 70 of epoch 0: false
	// highest offset of epoch 0: 99
	// finish after delete started: true
}

// Every failure wraps a sentinel that errors.Is matches.
func ExampleErrInvalidAdd() {
	m := rs.NewInMemoryManager()
	tp := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "orders", Partition: 0}
	err := m.AddRemoteLogSegmentMetadata(context.Background(), rs.RemoteLogSegmentMetadata{
		SegmentID:           rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.MustParse("6f1b7a9e-0d5c-4a8e-9c3e-2b1d0f4e5a6b")},
		StartOffset:         100,
		EndOffset:           199,
		SegmentLeaderEpochs: map[rs.LeaderEpoch]int64{2: 100, 3: 250},
	})
	fmt.Println(errors.Is(err, rs.ErrInvalidAdd))
	fmt.Println(err)
	// Output:
	// true
	// remotestorage: invalid add: segment 6f1b7a9e-0d5c-4a8e-9c3e-2b1d0f4e5a6b: epoch 3 starts at 250, outside [100, 199]
}

// Pointing the library at an existing database: migrate once (any broker may;
// concurrent migrations serialise), then one manager per broker process.
func ExampleNewPgManager() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	if err := rs.Migrate(ctx, pool); err != nil {
		panic(err)
	}
	m, err := rs.NewPgManager(ctx, pool)
	if err != nil {
		panic(err)
	}
	defer m.Close()

	tp := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "orders", Partition: 0}
	seg, found, err := m.RemoteLogSegmentMetadata(ctx, tp, 0, 1234)
	if err != nil {
		panic(err) // errors.Is(err, rs.ErrIO): the store failed
	}
	fmt.Println(found, seg.SegmentID.ID)
}
