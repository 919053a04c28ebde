package cache

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"
)

// Snapshot is a PostgreSQL snapshot (pg_snapshot) as the cache keeps it:
// where its partition's change feed resumes. The transactions it sees are
// those below xmin, and those below xmax not listed in xip; a row whose
// last_xid it does not see was written after it (docs/SCALING.md, "How the
// cache stays fresh").
type Snapshot struct {
	text       string   // as PostgreSQL prints it, "xmin:xmax:xip,…": what the statements take
	xmin, xmax uint64   // the transactions below xmin had ended; those from xmax had not begun
	xip        []uint64 // the transactions in between still running, sorted
}

// parseSnapshot reads pg_current_snapshot()'s text.
func parseSnapshot(text string) (Snapshot, error) {
	parts := strings.Split(text, ":")
	if len(parts) != 3 {
		return Snapshot{}, fmt.Errorf("snapshot %q: want xmin:xmax:xip", text)
	}
	s := Snapshot{text: text}
	var err error
	if s.xmin, err = strconv.ParseUint(parts[0], 10, 64); err != nil {
		return Snapshot{}, fmt.Errorf("snapshot %q: xmin: %w", text, err)
	}
	if s.xmax, err = strconv.ParseUint(parts[1], 10, 64); err != nil {
		return Snapshot{}, fmt.Errorf("snapshot %q: xmax: %w", text, err)
	}
	if parts[2] != "" {
		for x := range strings.SplitSeq(parts[2], ",") {
			xid, err := strconv.ParseUint(x, 10, 64)
			if err != nil {
				return Snapshot{}, fmt.Errorf("snapshot %q: xip: %w", text, err)
			}
			s.xip = append(s.xip, xid)
		}
		slices.Sort(s.xip)
	}
	return s, nil
}

// sees reports whether the snapshot sees the writes of transaction xid, one
// that has committed: as pg_visible_in_snapshot.
func (s Snapshot) sees(xid uint64) bool {
	switch {
	case xid < s.xmin:
		return true
	case xid >= s.xmax:
		return false
	}
	_, running := slices.BinarySearch(s.xip, xid)
	return !running
}

// Text is the snapshot as PostgreSQL prints it, which the statements take.
func (s Snapshot) Text() string { return s.text }

// vanishedSince reports whether rows of the partition were deleted that a
// cache brought up to snapshot after may not have seen forgotten: the
// purge's vanished_xid, the largest last_xid of the rows it deleted, is not
// below the snapshot's xmin.
func vanishedSince(vanished pgtype.Uint64, after Snapshot) bool {
	return vanished.Valid && vanished.Uint64 >= after.xmin
}

// wentBack reports whether s, taken after prev, has transaction ids behind
// prev's: a failover to a standby that lacked the old primary's last
// transactions.
func (s Snapshot) wentBack(prev Snapshot) bool { return s.xmax < prev.xmax }
