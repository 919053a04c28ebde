package remotestorage

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage/internal/partition"
)

// TestPartitionStateCodes: internal/partition, which cannot import the
// root package, names the state codes its semantics depend on; they must
// be statemachine.go's.
func TestPartitionStateCodes(t *testing.T) {
	require.EqualValues(t, CopySegmentFinished, partition.CopySegmentFinished)
	require.EqualValues(t, DeleteSegmentFinished, partition.DeleteSegmentFinished)
	require.EqualValues(t, DeletePartitionFinished, partition.DeletePartitionFinished)
	require.EqualValues(t, partitionDeleteNone, partition.DeleteNone)
}
