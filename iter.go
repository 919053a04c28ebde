package remotestorage

import (
	"context"
	"iter"

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

// listPageSize is how many segments one page of a stream holds: about
// 300 KB of rows, and one round trip per thousand segments.
const listPageSize = 1000

// listKey is a segment's position in list order: its start offset, then the
// write order of its add. It is unique within a partition and never
// changes, so it serves as the cursor between pages.
type listKey struct {
	StartOffset  int64
	AddedVersion int64
}

// beforeFirst is the cursor of the first page: every key is after it.
var beforeFirst = listKey{StartOffset: -1, AddedVersion: -1}

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

func itemFromRow(r *apiRow) listItem {
	return listItem{key: listKey{StartOffset: r.StartOffset, AddedVersion: r.AddedVersion}, meta: segmentFromRow(r)}
}

// pageOf returns copies of the first limit listed segments of p after the
// cursor that keep accepts, in list order. Callers hold the owner's read
// lock.
func pageOf(p *partition.Partition, after listKey, limit int, keep func(partition.Ref) bool) []listItem {
	if limit <= 0 {
		return nil
	}
	var items []listItem
	for r := range p.ListAfter(after.StartOffset, after.AddedVersion, keep) {
		items = append(items, listItem{key: listKey{StartOffset: r.Start(), AddedVersion: r.AddedVersion()}, meta: publicSegment(r)})
		if len(items) == limit {
			break
		}
	}
	return items
}
