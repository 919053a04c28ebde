package partition

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// A column keeps its values exactly, in 4 bytes each while they fit a
// window, in 8 once they do not; 0 always fits.
func TestColumnNarrowWhileValuesFit(t *testing.T) {
	var c column
	ts := int64(1_700_000_000_000)
	for i := range int64(1000) {
		c.push(ts + i*1000)
	}
	c.push(0)
	c.push(ts - 1_000_000) // below the base: a rebase, still narrow
	require.Nil(t, c.wide, "values within the window stay narrow")
	require.EqualValues(t, ts+999_000, c.get(999))
	require.Zero(t, c.get(1000))
	require.EqualValues(t, ts-1_000_000, c.get(1001))
	c.set(5, ts+1<<40) // too far: wide
	require.NotNil(t, c.wide)
	for i := range int32(1000) {
		want := ts + int64(i)*1000
		if i == 5 {
			want = ts + 1<<40
		}
		require.EqualValues(t, want, c.get(i))
	}
	require.EqualValues(t, ts-1_000_000, c.get(1001))
	c.truncate(0)
	c.push(math.MinInt64)
	c.push(math.MinInt64 + 1)
	require.Nil(t, c.wide, "narrow again once emptied")
	require.EqualValues(t, int64(math.MinInt64), c.get(0))
	c.push(math.MaxInt64)
	require.NotNil(t, c.wide)
	require.EqualValues(t, int64(math.MaxInt64), c.get(2))
	require.EqualValues(t, int64(math.MinInt64+1), c.get(1))
}

// A column against a plain []int64, under random writes, moves and
// truncations, with values drawn from windows of several widths.
func TestColumnRandom(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var c column
		var want []int64
		spread := []int64{1, 1000, 1 << 29, 1 << 31, 1 << 33, math.MaxInt64}[seed%6]
		center := []int64{0, 1 << 40, -1 << 50, math.MaxInt64 - 1<<30, math.MinInt64 + 1<<30}[seed%5]
		value := func() int64 {
			if rng.IntN(10) == 0 {
				return 0
			}
			d := rng.Int64N(spread)
			if rng.IntN(2) == 0 && center > math.MinInt64+d {
				return center - d
			}
			if center < math.MaxInt64-d {
				return center + d
			}
			return center
		}
		for range 500 {
			switch n := int32(len(want)); {
			case n == 0 || rng.IntN(3) == 0:
				v := value()
				c.push(v)
				want = append(want, v)
			case rng.IntN(20) == 0:
				k := rng.IntN(int(n) + 1)
				c.truncate(k)
				want = want[:k]
			case rng.IntN(5) == 0:
				dst, src := rng.Int32N(n), rng.Int32N(n)
				c.move(dst, src)
				want[dst] = want[src]
			default:
				i, v := rng.Int32N(n), value()
				c.set(i, v)
				want[i] = v
			}
			if rng.IntN(8) == 0 {
				for i, v := range want {
					require.Equal(t, v, c.get(int32(i)), "seed %d, position %d", seed, i)
				}
			}
			if spread <= 1<<29 && center > math.MinInt64+1<<30 && center < math.MaxInt64-1<<30 {
				require.Nil(t, c.wide, "seed %d: values within 2^30 of each other stay narrow", seed)
			}
		}
	}
}
