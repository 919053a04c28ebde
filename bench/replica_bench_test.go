package bench_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/rstest"
)

// BenchmarkReplicaCommitToCaughtUp measures the replica's staleness under a
// write load: the time from a commit on the primary until CaughtUp, reading
// from the standby, says true.
//
//	go test -run '^$' -bench ReplicaCommitToCaughtUp ./bench
func BenchmarkReplicaCommitToCaughtUp(b *testing.B) {
	primary, standby, _ := rstest.PrimaryAndStandby(b)
	m, err := rs.NewPgManager(b.Context(), primary, rs.WithReadReplica(standby))
	require.NoError(b, err)
	measureCommitToCaughtUp(b, m, m, rstest.TP(0))
}
