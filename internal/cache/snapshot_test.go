package cache

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A snapshot sees the transactions below xmin, and those below xmax that it
// does not list as running; it keeps PostgreSQL's text for the statements.
func TestSnapshotSees(t *testing.T) {
	s, err := parseSnapshot("10:20:15,12")
	require.NoError(t, err)
	require.Equal(t, "10:20:15,12", s.Text())
	for xid, seen := range map[uint64]bool{9: true, 10: true, 11: true, 12: false, 15: false, 19: true, 20: false, 21: false} {
		require.Equal(t, seen, s.sees(xid), "xid %d", xid)
	}
	none, err := parseSnapshot("7:7:")
	require.NoError(t, err)
	require.True(t, none.sees(6))
	require.False(t, none.sees(7))
}

func TestParseSnapshotRefusesWhatIsNotASnapshot(t *testing.T) {
	for _, text := range []string{"", "1:2", "1:2:3:4", "x:2:", "1:y:", "1:2:3,z"} {
		_, err := parseSnapshot(text)
		require.Error(t, err, "%q", text)
		require.Contains(t, err.Error(), text, "the error names the text")
	}
}
