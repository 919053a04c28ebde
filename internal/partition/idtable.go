package partition

import (
	"hash/maphash"

	"github.com/google/uuid"
)

// idTable finds a segment's position by its id: open addressing with
// linear probing over positions, 4 bytes a slot and at most 3/4 full, the
// ids themselves being the partition's ids column. (A map[uuid.UUID]int32
// costs about 40 bytes an entry.)
type idTable struct {
	slots []int32 // position + 1; 0: empty
	n     int
}

// idSeed seeds the ids' hash: the ids come from brokers, and a seed of the
// process keeps ids chosen to collide from making probes long.
var idSeed = maphash.MakeSeed()

func (t *idTable) home(id uuid.UUID) int {
	return int(maphash.Comparable(idSeed, id) & uint64(len(t.slots)-1))
}

// find returns the position of id in ids, false when the table holds none.
func (t *idTable) find(ids []uuid.UUID, id uuid.UUID) (int32, bool) {
	if t.n == 0 {
		return -1, false
	}
	mask := len(t.slots) - 1
	for i := t.home(id); ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			return -1, false
		}
		if ids[s-1] == id {
			return s - 1, true
		}
	}
}

// insert adds position pos, whose id ids[pos] the table does not hold.
func (t *idTable) insert(ids []uuid.UUID, pos int32) {
	if 4*(t.n+1) > 3*len(t.slots) {
		t.resize(ids, t.n+1)
	}
	t.place(ids, pos)
	t.n++
}

func (t *idTable) place(ids []uuid.UUID, pos int32) {
	mask := len(t.slots) - 1
	i := t.home(ids[pos])
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = pos + 1
}

// remove takes id out of the table, shifting back the entries after it
// that probed past its slot, so that no probe stops short of them.
func (t *idTable) remove(ids []uuid.UUID, id uuid.UUID) {
	if t.n == 0 {
		return
	}
	mask := len(t.slots) - 1
	i := t.home(id)
	for {
		s := t.slots[i]
		if s == 0 {
			return // not held
		}
		if ids[s-1] == id {
			break
		}
		i = (i + 1) & mask
	}
	t.slots[i] = 0
	t.n--
	for j := (i + 1) & mask; t.slots[j] != 0; j = (j + 1) & mask {
		// The entry at j stays when its home lies cyclically in (i, j].
		k := t.home(ids[t.slots[j]-1])
		if (i < j && i < k && k <= j) || (j < i && (i < k || k <= j)) {
			continue
		}
		t.slots[i], t.slots[j] = t.slots[j], 0
		i = j
	}
}

// resize sizes the table for n entries and places the entries it holds
// anew.
func (t *idTable) resize(ids []uuid.UUID, n int) {
	size := 16
	for 3*size < 4*n {
		size *= 2
	}
	old := t.slots
	t.slots = make([]int32, size)
	for _, s := range old {
		if s != 0 {
			t.place(ids, s-1)
		}
	}
}

// rebuild holds positions 0 to len(ids)-1, in a table sized for n entries
// (n ≥ len(ids)).
func (t *idTable) rebuild(ids []uuid.UUID, n int) {
	t.slots, t.n = nil, 0
	if n == 0 {
		return
	}
	t.resize(ids, n)
	for pos := range ids {
		t.place(ids, int32(pos))
	}
	t.n = len(ids)
}
