package partition

import (
	"math"
	"slices"
)

// column holds one int64 per segment position. While its values other than
// 0 lie within a window of about 2^31 of each other, it keeps each in 4
// bytes, as its offset from base; once one does not fit, in 8. Within one
// partition the live segments' offsets, timestamps and write orders mostly
// do fit (2^31 ms is 24 days; the live offsets of most partitions, and the
// writes to the whole database while they are live, span less than 2^31),
// and a segment has seven such values.
type column struct {
	base   int64
	narrow []uint32 // 0: the value 0; k > 0: base + k - 1
	wide   []int64  // non-nil once a value did not fit (narrow is then nil)
}

// maxCode is the largest code of a narrow column.
const maxCode = math.MaxUint32

func (c *column) get(i int32) int64 {
	if c.wide != nil {
		return c.wide[i]
	}
	if k := c.narrow[i]; k != 0 {
		return c.base + int64(k-1)
	}
	return 0
}

// encode returns the code of v in a narrow column, false when v does not
// fit.
func (c *column) encode(v int64) (uint32, bool) {
	if v == 0 {
		return 0, true
	}
	if v < c.base {
		return 0, false
	}
	d := uint64(v) - uint64(c.base)
	if d >= maxCode {
		return 0, false
	}
	return uint32(d + 1), true
}

func (c *column) set(i int32, v int64) {
	if c.wide != nil {
		c.wide[i] = v
		return
	}
	if k, ok := c.encode(v); ok {
		c.narrow[i] = k
		return
	}
	c.narrow[i] = 0 // the value replaced does not count in the window
	c.refit(v)
	c.set(i, v)
}

// refit makes room for v, not 0, which does not fit: a new base at the
// middle of the window when v and the values held span at most half of it
// (so that a rebase is rare and costs O(n) for values that moved by 2^30),
// else the wide form.
func (c *column) refit(v int64) {
	lo, hi := v, v
	for _, k := range c.narrow {
		if k != 0 {
			x := c.base + int64(k-1)
			lo, hi = min(lo, x), max(hi, x)
		}
	}
	span := uint64(hi) - uint64(lo)
	if span >= maxCode/2 {
		wide := make([]int64, len(c.narrow), cap(c.narrow))
		for i := range c.narrow {
			wide[i] = c.get(int32(i))
		}
		c.wide, c.narrow = wide, nil
		return
	}
	slack := (maxCode - 1 - span) / 2
	slack = min(slack, uint64(lo)+1<<63) // base no lower than MinInt64: lo - MinInt64, mod 2^64
	base := int64(uint64(lo) - slack)
	for i, k := range c.narrow {
		if k != 0 {
			c.narrow[i] = uint32(uint64(c.base+int64(k-1)) - uint64(base) + 1)
		}
	}
	c.base = base
}

// push appends v.
func (c *column) push(v int64) {
	if c.wide != nil {
		c.wide = append(c.wide, v)
		return
	}
	c.narrow = append(c.narrow, 0)
	c.set(int32(len(c.narrow)-1), v)
}

// len is the number of values.
func (c *column) len() int {
	if c.wide != nil {
		return len(c.wide)
	}
	return len(c.narrow)
}

// move copies the value at src to dst.
func (c *column) move(dst, src int32) {
	if c.wide != nil {
		c.wide[dst] = c.wide[src]
	} else {
		c.narrow[dst] = c.narrow[src]
	}
}

// truncate keeps the first n values, and lets go of a backing array more
// than twice as large as they need.
func (c *column) truncate(n int) {
	switch {
	case n == 0:
		*c = column{} // narrow again
	case c.wide != nil:
		c.wide = shrink(c.wide[:n])
	default:
		c.narrow = shrink(c.narrow[:n])
	}
}

// grow makes room for n more values.
func (c *column) grow(n int) {
	if c.wide != nil {
		c.wide = slices.Grow(c.wide, n)
	} else {
		c.narrow = slices.Grow(c.narrow, n)
	}
}

// shrink returns s, copied to a backing array of its length when its own
// is more than twice that.
func shrink[T any](s []T) []T {
	if cap(s) > 2*len(s)+8 {
		return slices.Clone(s)
	}
	return s
}
