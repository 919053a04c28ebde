package remotestorage

import (
	"context"
	"iter"

	"github.com/krabka/remotestorage/db"
	"github.com/krabka/remotestorage/internal/dbuuid"
	"github.com/krabka/remotestorage/internal/partition"
)

// PgManager's SegmentStreams (iter.go).

// RemoteLogSegments streams ListRemoteLogSegments(ctx, tp): one statement per
// page of listPageSize segments, read in list order through the list index
// (from the cache instead when the manager caches tp). See SegmentStreams.
func (m *PgManager) RemoteLogSegments(ctx context.Context, tp TopicIDPartition) iter.Seq2[RemoteLogSegmentMetadata, error] {
	return m.remoteLogSegments(ctx, tp, listPageSize)
}

func (m *PgManager) remoteLogSegments(ctx context.Context, tp TopicIDPartition, pageSize int) iter.Seq2[RemoteLogSegmentMetadata, error] {
	fetch := func(ctx context.Context, after listKey, limit int) ([]listItem, error) {
		if page, served, err := m.pageFromCache(tp, after, limit, partition.All); served {
			return page, err
		}
		page, err := scanSegments(ctx, m.reader, func(rec db.DBTX) error {
			_, err := m.queries.SegmentListPage(ctx, rec, db.SegmentListPageParams{
				TopicID: dbuuid.UUID(tp.TopicID), Partition: tp.Partition,
				AfterStartOffset: after.StartOffset, AfterAddedVersion: after.AddedVersion,
				PageSize: int32(limit),
			})
			return err
		}, itemFromRow)
		if err != nil {
			return nil, ioError(ctx, err, "list segments of %s after offset %d", tp, after.StartOffset)
		}
		return page, nil
	}
	return streamPages(ctx, pageSize, fetch, func(err error) error { return ioError(ctx, err, "list segments of %s", tp) })
}

// RemoteLogSegmentsByEpoch streams ListRemoteLogSegmentsByEpoch(ctx, tp,
// epoch): one statement per page of listPageSize segments, read in list
// order through the epoch list index (from the cache instead when the
// manager caches tp). See SegmentStreams.
func (m *PgManager) RemoteLogSegmentsByEpoch(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch) iter.Seq2[RemoteLogSegmentMetadata, error] {
	return m.remoteLogSegmentsByEpoch(ctx, tp, epoch, listPageSize)
}

func (m *PgManager) remoteLogSegmentsByEpoch(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch, pageSize int) iter.Seq2[RemoteLogSegmentMetadata, error] {
	fetch := func(ctx context.Context, after listKey, limit int) ([]listItem, error) {
		if page, served, err := m.pageFromCache(tp, after, limit, carries(epoch)); served {
			return page, err
		}
		page, err := scanSegments(ctx, m.reader, func(rec db.DBTX) error {
			_, err := m.queries.SegmentListByEpochPage(ctx, rec, db.SegmentListByEpochPageParams{
				TopicID: dbuuid.UUID(tp.TopicID), Partition: tp.Partition, Epoch: int32(epoch),
				AfterStartOffset: after.StartOffset, AfterAddedVersion: after.AddedVersion,
				PageSize: int32(limit),
			})
			return err
		}, itemFromRow)
		if err != nil {
			return nil, ioError(ctx, err, "list segments of epoch %d in %s after offset %d", epoch, tp, after.StartOffset)
		}
		return page, nil
	}
	return streamPages(ctx, pageSize, fetch, func(err error) error {
		return ioError(ctx, err, "list segments of epoch %d in %s", epoch, tp)
	})
}

// pageFromCache reads a page from the cache when the manager caches tp.
func (m *PgManager) pageFromCache(tp TopicIDPartition, after listKey, limit int, keep func(partition.Ref) bool) (page []listItem, served bool, err error) {
	served, err = m.fromCache(tp, func(p *partition.Partition) { page = pageOf(p, after, limit, keep) })
	return page, served, err
}
