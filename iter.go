package remotestorage

import (
	"context"
	"fmt"
	"iter"

	"github.com/krabka/remotestorage/db"
	"github.com/krabka/remotestorage/internal/dbuuid"
	"github.com/krabka/remotestorage/internal/partition"
)

// SegmentStreams are the streaming variants of the two lists: they yield the
// segments of ListRemoteLogSegments and ListRemoteLogSegmentsByEpoch in the
// same order without holding the whole partition in memory. Both
// InMemoryManager and PgManager implement them.
//
// A stream reads the partition in pages of 1 000 segments, each page one
// statement on PgManager (or a read of its cache, when it caches the
// partition), resuming after the list key (StartOffset, then the order of
// adds) of the last segment it yielded. Pages are not one snapshot: a segment that stays visible during
// the walk is yielded exactly once, in its state when its page was read; a
// segment added or forgotten during the walk may or may not be yielded.
// Callers that need one snapshot use the slice lists.
//
// On failure a stream yields one (zero, err) and stops. A done ctx stops it
// too, with an error that matches ctx.Err() (and, from PgManager, ErrIO).
// Breaking out of the loop early is fine and leaves nothing behind: no
// connection is held between pages.
type SegmentStreams interface {
	// RemoteLogSegments streams ListRemoteLogSegments(ctx, tp).
	RemoteLogSegments(ctx context.Context, tp TopicIDPartition) iter.Seq2[RemoteLogSegmentMetadata, error]
	// RemoteLogSegmentsByEpoch streams ListRemoteLogSegmentsByEpoch(ctx, tp, epoch).
	RemoteLogSegmentsByEpoch(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch) iter.Seq2[RemoteLogSegmentMetadata, error]
}

var _ SegmentStreams = (*PgManager)(nil)
var _ SegmentStreams = (*InMemoryManager)(nil)

// listPageSize is how many segments one page of a stream holds: about
// 300 KB of rows, and one round trip per thousand segments.
const listPageSize = 1000

// listKey is a segment's position in list order: its start offset, then the
// write order of its add. It is unique within a partition and never
// changes, so it serves as the cursor between pages.
type listKey struct {
	startOffset  int64
	addedVersion int64
}

// beforeFirst is the cursor of the first page: every key is after it.
var beforeFirst = listKey{startOffset: -1, addedVersion: -1}

// streamPages yields, page after page, what fetch returns for the cursor
// after the previous page's last item. fetch returns at most limit items in
// list order; it is asked for one more than a page, so that a short answer
// ends the walk without a trailing empty read. ctxErr turns a done context
// into the error the stream yields.
func streamPages(ctx context.Context, pageSize int,
	fetch func(ctx context.Context, after listKey, limit int) ([]listItem, error),
	ctxErr func(error) error,
) iter.Seq2[RemoteLogSegmentMetadata, error] {
	return func(yield func(RemoteLogSegmentMetadata, error) bool) {
		after := beforeFirst
		for {
			if err := ctx.Err(); err != nil {
				yield(RemoteLogSegmentMetadata{}, ctxErr(err))
				return
			}
			page, err := fetch(ctx, after, pageSize+1)
			if err != nil {
				yield(RemoteLogSegmentMetadata{}, err)
				return
			}
			more := len(page) > pageSize
			if more {
				page = page[:pageSize]
			}
			for _, item := range page {
				if err := ctx.Err(); err != nil {
					yield(RemoteLogSegmentMetadata{}, ctxErr(err))
					return
				}
				if !yield(item.meta, nil) {
					return
				}
			}
			if !more {
				return
			}
			after = page[len(page)-1].key
		}
	}
}

// listItem is a segment of a page, with its list key.
type listItem struct {
	key  listKey
	meta RemoteLogSegmentMetadata
}

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
				AfterStartOffset: after.startOffset, AfterAddedVersion: after.addedVersion,
				PageSize: int32(limit),
			})
			return err
		}, itemFromRow)
		if err != nil {
			return nil, ioError(ctx, err, "list segments of %s after offset %d", tp, after.startOffset)
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
				AfterStartOffset: after.startOffset, AfterAddedVersion: after.addedVersion,
				PageSize: int32(limit),
			})
			return err
		}, itemFromRow)
		if err != nil {
			return nil, ioError(ctx, err, "list segments of epoch %d in %s after offset %d", epoch, tp, after.startOffset)
		}
		return page, nil
	}
	return streamPages(ctx, pageSize, fetch, func(err error) error {
		return ioError(ctx, err, "list segments of epoch %d in %s", epoch, tp)
	})
}

// pageFromCache reads a page from the cache when the manager caches tp.
func (m *PgManager) pageFromCache(tp TopicIDPartition, after listKey, limit int, keep func(*partition.Segment) bool) (page []listItem, served bool, err error) {
	served, err = m.fromCache(tp, func(p *partition.Partition) { page = pageOf(p, after, limit, keep) })
	return page, served, err
}

func itemFromRow(r *apiRow) listItem {
	return listItem{key: listKey{startOffset: r.StartOffset, addedVersion: r.AddedVersion}, meta: segmentFromRow(r)}
}

// RemoteLogSegments streams ListRemoteLogSegments(ctx, tp), a page of
// listPageSize segments per read lock. See SegmentStreams.
func (m *InMemoryManager) RemoteLogSegments(ctx context.Context, tp TopicIDPartition) iter.Seq2[RemoteLogSegmentMetadata, error] {
	return m.remoteLogSegments(ctx, tp, listPageSize)
}

func (m *InMemoryManager) remoteLogSegments(ctx context.Context, tp TopicIDPartition, pageSize int) iter.Seq2[RemoteLogSegmentMetadata, error] {
	return m.stream(ctx, tp, pageSize, partition.All,
		func(err error) error { return fmt.Errorf("remotestorage: list segments of %s: %w", tp, err) })
}

// RemoteLogSegmentsByEpoch streams ListRemoteLogSegmentsByEpoch(ctx, tp,
// epoch), a page of listPageSize segments per read lock. See SegmentStreams.
func (m *InMemoryManager) RemoteLogSegmentsByEpoch(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch) iter.Seq2[RemoteLogSegmentMetadata, error] {
	return m.remoteLogSegmentsByEpoch(ctx, tp, epoch, listPageSize)
}

func (m *InMemoryManager) remoteLogSegmentsByEpoch(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch, pageSize int) iter.Seq2[RemoteLogSegmentMetadata, error] {
	return m.stream(ctx, tp, pageSize, carries(epoch), func(err error) error {
		return fmt.Errorf("remotestorage: list segments of epoch %d in %s: %w", epoch, tp, err)
	})
}

// stream pages through the listed segments of tp that keep accepts. The lock
// is held only while a page is copied, never while the caller's loop body
// runs, so the body may call the manager.
func (m *InMemoryManager) stream(ctx context.Context, tp TopicIDPartition, pageSize int, keep func(*partition.Segment) bool, ctxErr func(error) error) iter.Seq2[RemoteLogSegmentMetadata, error] {
	fetch := func(_ context.Context, after listKey, limit int) ([]listItem, error) {
		m.mu.RLock()
		defer m.mu.RUnlock()
		return pageOf(m.partition(tp), after, limit, keep), nil
	}
	return streamPages(ctx, pageSize, fetch, ctxErr)
}

// pageOf returns copies of the first limit listed segments of p after the
// cursor that keep accepts, in list order. Callers hold the owner's read
// lock.
func pageOf(p *partition.Partition, after listKey, limit int, keep func(*partition.Segment) bool) []listItem {
	if limit <= 0 {
		return nil
	}
	var items []listItem
	for s := range p.ListAfter(after.startOffset, after.addedVersion, keep) {
		items = append(items, listItem{key: listKey{startOffset: s.Start, addedVersion: s.AddedVersion}, meta: publicSegment(s)})
		if len(items) == limit {
			break
		}
	}
	return items
}
