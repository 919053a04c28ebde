package remotestorage

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/krabka/remotestorage/db"
)

// apiRow is what the reads that answer with segments select
// (queries/segments.sql): the columns RemoteLogSegmentMetadata carries, and
// added_version, the list key of the streaming pages. It is SegmentList's
// row type; each other such query's row type converts to it, so the
// compiler holds their select lists to the same columns in the same order.
type apiRow = db.SegmentListRow

var (
	_ = apiRow(db.SegmentLookupRow{})
	_ = apiRow(db.SegmentFirstForTimestampRow{})
	_ = apiRow(db.SegmentNextWithTxnIndexRow{})
	_ = apiRow(db.SegmentListPageRow{})
	_ = apiRow(db.SegmentListByEpochRow{})
	_ = apiRow(db.SegmentListByEpochPageRow{})
)

// segmentFromRow converts a stored segment to the public type.
func segmentFromRow(r *apiRow) RemoteLogSegmentMetadata {
	epochs := make(map[LeaderEpoch]int64, len(r.Epochs))
	for i, e := range r.Epochs {
		epochs[LeaderEpoch(e)] = r.EpochStartOffsets[i]
	}
	return RemoteLogSegmentMetadata{
		SegmentID: RemoteLogSegmentID{
			TopicIDPartition: TopicIDPartition{TopicID: uuid.UUID(r.TopicID), Topic: r.Topic, Partition: r.Partition},
			ID:               uuid.UUID(r.SegmentID),
		},
		StartOffset:         r.StartOffset,
		EndOffset:           r.EndOffset,
		MaxTimestampMs:      r.MaxTimestampMs,
		BrokerID:            r.BrokerID,
		EventTimestampMs:    r.EventTimestampMs,
		SegmentSizeInBytes:  r.SegmentSizeBytes,
		CustomMetadata:      r.CustomMetadata,
		State:               RemoteLogSegmentState(r.State),
		SegmentLeaderEpochs: epochs,
		TxnIndexEmpty:       r.TxnIndexEmpty,
	}
}

// scanSegments runs a generated list query and scans each row straight into
// what conv makes of it. sqlc's :many methods scan every row into a struct
// of their own, which escapes to the heap, and append it to a slice that
// then grows by copying: with the conversion to the public type after, that
// was a third of a 100-segment list's client CPU and half its garbage.
//
// query calls the generated method on the db.DBTX it is given; scanSegments
// gives it one that only records the statement and its arguments, so that
// both still come from sqlc, in the order its SQL numbers them, and runs
// them on tx.
func scanSegments[T any](ctx context.Context, tx db.DBTX, query func(db.DBTX) error, conv func(*apiRow) T) ([]T, error) {
	var rec statementRecorder
	if err := query(&rec); !errors.Is(err, errRecorded) {
		return nil, err
	}
	rows, err := tx.Query(ctx, rec.sql, rec.args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []T{}
	var r apiRow
	for rows.Next() {
		// Scanned into nil, the slices are new: the segment keeps them.
		r.CustomMetadata, r.Epochs, r.EpochStartOffsets = nil, nil, nil
		if err := rows.Scan(&r.TopicID, &r.Partition, &r.SegmentID, &r.Topic, &r.StartOffset, &r.EndOffset, &r.MaxTimestampMs,
			&r.BrokerID, &r.EventTimestampMs, &r.SegmentSizeBytes, &r.CustomMetadata, &r.State, &r.TxnIndexEmpty,
			&r.Epochs, &r.EpochStartOffsets, &r.AddedVersion); err != nil {
			return nil, err
		}
		out = append(out, conv(&r))
	}
	return out, rows.Err()
}

// errRecorded is what statementRecorder answers: the statement did not run.
var errRecorded = errors.New("statement recorded, not run")

// statementRecorder is a db.DBTX that runs nothing: it keeps the statement
// and the arguments of the one query a generated method sends.
type statementRecorder struct {
	sql  string
	args []any
}

func (r *statementRecorder) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	r.sql, r.args = sql, args
	return nil, errRecorded
}

func (r *statementRecorder) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errors.New("statementRecorder records queries of many rows only")
}

func (r *statementRecorder) QueryRow(context.Context, string, ...any) pgx.Row {
	return recordedRow{}
}

type recordedRow struct{}

func (recordedRow) Scan(...any) error {
	return errors.New("statementRecorder records queries of many rows only")
}
