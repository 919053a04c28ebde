package partition

import (
	"math/rand/v2"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// The id table against a map, through inserts and removals that cross
// its resizes.
func TestIDTableRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var table idTable
	var ids []uuid.UUID
	held := map[uuid.UUID]int32{}
	for step := range 20_000 {
		if len(held) == 0 || rng.IntN(3) != 0 {
			id := uuid.New()
			ids = append(ids, id)
			table.insert(ids, int32(len(ids)-1))
			held[id] = int32(len(ids) - 1)
		} else {
			for id := range held { // a random one
				table.remove(ids, id)
				delete(held, id)
				break
			}
			table.remove(ids, uuid.New()) // not held: nothing
		}
		if step%211 == 0 || step == 19_999 {
			require.Equal(t, len(held), table.n)
			for id, pos := range held {
				got, ok := table.find(ids, id)
				require.True(t, ok)
				require.Equal(t, pos, got)
			}
			for _, id := range ids {
				_, want := held[id]
				_, ok := table.find(ids, id)
				require.Equal(t, want, ok)
			}
			require.LessOrEqual(t, 4*table.n, 3*len(table.slots), "at most 3/4 full")
		}
	}
}
