package remotestorage

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/krabka/remotestorage/db"
	"github.com/krabka/remotestorage/internal/dbuuid"
)

// warmUpKey marks, in its pgconn.PgConn.CustomData, a connection of a
// ConfigurePool pool that has not been warmed yet: its AfterConnect sets
// it, release takes it.
const warmUpKey = "remotestorage.warm-up"

// warmUpTimeout bounds a warm-up, which no caller waits for.
const warmUpTimeout = 5 * time.Second

// release gives a connection back to its pool after a statement of the
// manager. A connection marked for warm-up (warmUpKey) is warmed first, on
// a goroutine of its own: the caller has its answer, and the connection
// returns to the pool once warm (pgxpool closes it instead if the warm-up
// left it broken or in a transaction). So a new connection's first call
// pays only for what it needs, no caller's deadline covers the warm-up,
// and the calls the connection serves next find it warm.
func release(conn *pgxpool.Conn) {
	data := conn.Conn().PgConn().CustomData()
	if data[warmUpKey] == nil {
		conn.Release()
		return
	}
	delete(data, warmUpKey)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), warmUpTimeout)
		defer cancel()
		warmUp(ctx, conn.Conn())
		conn.Release()
	}()
}

// warmUp runs the manager's statements once on a connection, in a
// transaction it rolls back: an add and its COPY_SEGMENT_FINISHED of a
// segment in a partition of a random topic id, and the queries of the
// partition. The connection then holds them prepared and the catalog
// entries they read loaded, so that the calls it serves next cost about
// what warm ones do (docs/BENCHMARKS.md, BenchmarkColdStart). Nothing is
// stored. It fails silently: a connection to a database not migrated yet,
// or to a standby, stays cold (from its add on).
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
	_, _ = q.PrimaryPosition(ctx, tx)
}
