package remotestorage

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/krabka/remotestorage/db"
	"github.com/krabka/remotestorage/internal/dbuuid"
)

// FirstSegmentForTimestamp returns the first COPY_SEGMENT_FINISHED segment
// carrying epoch, in the order of ListRemoteLogSegmentsByEpoch (StartOffset,
// ties by the order added), whose MaxTimestampMs >= timestampMs and
// EndOffset >= startingOffset: the segment whose time index a broker reads to
// answer ListOffsets by timestamp. None: (zero, false, nil). One indexed
// statement that walks the epoch's finished segments from near
// startingOffset (queries/epochs.sql).
func (m *PgManager) FirstSegmentForTimestamp(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch, timestampMs, startingOffset int64) (RemoteLogSegmentMetadata, bool, error) {
	if s, found, served, err := m.segmentFromCache(tp, func(p *memPartition) *memSegment {
		return p.firstForTimestamp(epoch, timestampMs, startingOffset)
	}); served {
		return s, found, err
	}
	// Every EndOffset is >= 0, so a negative startingOffset filters nothing
	// more than 0 does (and the walk's bound cannot overflow).
	startingOffset = max(startingOffset, 0)
	row, err := runStatement(ctx, m.reader, func(ctx context.Context, tx db.DBTX) (db.SegmentFirstForTimestampRow, error) {
		return m.queries.SegmentFirstForTimestamp(ctx, tx, db.SegmentFirstForTimestampParams{
			TopicID: dbuuid.UUID(tp.TopicID), Partition: tp.Partition, Epoch: int32(epoch),
			TimestampMs: timestampMs, StartingOffset: startingOffset,
		})
	}, nil)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return RemoteLogSegmentMetadata{}, false, nil
	case err != nil:
		return RemoteLogSegmentMetadata{}, false, ioError(ctx, err, "first segment of epoch %d in %s with timestamp >= %d from offset %d", epoch, tp, timestampMs, startingOffset)
	}
	return segmentFromRow(row.RlmmSegment), true, nil
}

// EpochEndOffset is Kafka's meaning of "highest offset for epoch", for
// brokers whose copy task resumes from it: the largest offset o such that the
// range of epoch in some segment that reached COPY_SEGMENT_FINISHED contains
// o. Segments deleted since still count (deletes never lower it);
// DELETE_PARTITION_FINISHED forgets it. None: (0, false, nil). One
// primary-key read of the epoch's high-water mark (rlmm_epoch_ends).
func (m *PgManager) EpochEndOffset(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch) (int64, bool, error) {
	var end int64
	var found bool
	if served, err := m.fromCache(tp, func(p *memPartition) { end, found = p.epochEnd(epoch) }); served {
		return end, found, err
	}
	end, err := runStatement(ctx, m.reader, func(ctx context.Context, tx db.DBTX) (int64, error) {
		return m.queries.EpochEndOffset(ctx, tx, db.EpochEndOffsetParams{
			TopicID: dbuuid.UUID(tp.TopicID), Partition: tp.Partition, Epoch: int32(epoch),
		})
	}, nil)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, ioError(ctx, err, "end offset of epoch %d in %s", epoch, tp)
	}
	return end, true, nil
}

// readEpochEnds reads, in the catch-up's snapshot tx, the partition's epoch
// ends raised after version after (pgCache.catchUp).
func (c *pgCache) readEpochEnds(ctx context.Context, tx pgx.Tx, tp TopicIDPartition, after int64) ([]db.EpochEndsChangedRow, error) {
	return c.m.queries.EpochEndsChanged(ctx, tx, db.EpochEndsChangedParams{
		TopicID: dbuuid.UUID(tp.TopicID), Partition: tp.Partition, AfterVersion: after,
	})
}

// applyEpochEnds raises the cached partition's epoch ends to rows.
func applyEpochEnds(p *memPartition, rows []db.EpochEndsChangedRow) {
	for _, r := range rows {
		p.raiseEpochEnd(LeaderEpoch(r.Epoch), r.EndOffset)
	}
}
