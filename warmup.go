package remotestorage

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/krabka/remotestorage/db"
	"github.com/krabka/remotestorage/internal/dbuuid"
)

// warmUp runs the manager's statements once on a new connection, in a
// transaction it rolls back: an add and its COPY_SEGMENT_FINISHED of a
// segment in a partition of a random topic id, and the queries of the
// partition. The connection then holds them prepared and the catalog
// entries they read loaded, so that the first call it serves
// costs about what a warm one does (docs/BENCHMARKS.md, BenchmarkColdStart).
// Nothing is stored. It fails silently: a database not migrated yet (the
// pool Migrate runs on) simply gets a cold connection.
func warmUp(ctx context.Context, conn *pgx.Conn) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return
	}
	defer func() { _ = tx.Rollback(ctx) }()
	q := db.New()
	topicID, segmentID := dbuuid.UUID(uuid.New()), dbuuid.UUID(uuid.New())
	_, err = q.SegmentAdd(ctx, tx, db.SegmentAddParams{
		TopicID: topicID, Partition: 0, Topic: "rlmm_warm_up", SegmentID: segmentID,
		State: int16(CopySegmentStarted), TxnIndexEmpty: true,
		Epochs: []int32{0}, EpochFirstOffsets: []int64{0}, EpochLastOffsets: []int64{0},
	})
	if err != nil {
		return
	}
	if _, err := q.SegmentUpdate(ctx, tx, db.SegmentUpdateParams{
		TopicID: topicID, Partition: 0, SegmentID: segmentID,
		State: int16(CopySegmentFinished), Allowed: stateCodes(AllowedSegmentFromStates(CopySegmentFinished)), Finishing: true,
	}); err != nil {
		return
	}
	if _, err := q.SegmentLookup(ctx, tx, db.SegmentLookupParams{TopicID: topicID, Partition: 0, Epoch: 0, LookupOffset: 0}); err != nil {
		return
	}
	_, _ = q.PartitionVersion(ctx, tx, db.PartitionVersionParams{TopicID: topicID, Partition: 0})
}
