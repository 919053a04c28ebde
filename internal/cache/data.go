package cache

import (
	"github.com/google/uuid"

	"github.com/krabka/remotestorage/internal/partition"
)

// Data is the data of a cached partition: the reference partition
// the queries read, with what keeping it fresh needs on top: the write
// order of its delete record, and the tombstones of the segments forgotten
// by a write that the cache's snapshot does not see yet, so that an older
// row from a catch-up in flight cannot bring one back. Its cache's lock
// guards it.
type Data struct {
	*partition.Partition
	deleteVersion int64                   // the write order of the delete record
	forgotten     map[uuid.UUID]tombstone // pruned once the snapshot sees them
}

// tombstone is a forgotten segment: the lastVersion of the write that
// forgot it, and that write's transaction id.
type tombstone struct {
	lastVersion int64
	xid         uint64
}

// DeleteVersion is the write order of the delete record the data holds.
func (d *Data) DeleteVersion() int64 { return d.deleteVersion }

func newData() *Data {
	return &Data{Partition: partition.New(), forgotten: make(map[uuid.UUID]tombstone)}
}

// Put stores the cache's copy of a write to s, made in transaction xid,
// unless the partition already holds a newer write of the segment. A
// forgotten segment leaves memory, and leaves a tombstone.
func (d *Data) Put(s *partition.Segment, xid uint64) {
	id := s.ID
	if !d.newer(id, s.LastVersion) {
		return
	}
	if s.State == partition.DeleteSegmentFinished {
		d.Remove(id)
		d.forgotten[id] = tombstone{lastVersion: s.LastVersion, xid: xid}
		return
	}
	d.Store(s)
}

// newer reports whether a write of segment id at lastVersion is newer than
// what the partition holds of it.
func (d *Data) newer(id uuid.UUID, lastVersion int64) bool {
	if old, ok := d.Segment(id); ok {
		return old.LastVersion() < lastVersion
	}
	t, gone := d.forgotten[id]
	return !gone || t.lastVersion < lastVersion
}

// holdsWrite reports whether the partition holds the write of segment id
// at lastVersion, or a newer one.
func (d *Data) holdsWrite(id uuid.UUID, lastVersion int64) bool {
	if old, ok := d.Segment(id); ok {
		return old.LastVersion() >= lastVersion
	}
	t, gone := d.forgotten[id]
	return gone && t.lastVersion >= lastVersion
}

// pruneForgotten drops the tombstones that the cache's snapshot after
// sees: no catch-up brings an older row of theirs any more.
func (d *Data) pruneForgotten(after Snapshot) {
	for id, t := range d.forgotten {
		if after.sees(t.xid) {
			delete(d.forgotten, id)
		}
	}
}

// PutDeleteState stores the partition-delete state written at write order
// order, unless the partition holds a newer one.
func (d *Data) PutDeleteState(state int8, order int64) {
	if order > d.deleteVersion {
		d.DeleteState, d.deleteVersion = state, order
	}
}

// Purged applies a purge that took the partition's delete record at write
// order order, with every segment and epoch end it held.
func (d *Data) Purged(order int64) {
	d.DeleteState, d.deleteVersion = partition.DeleteNone, order
	d.Empty()
}
