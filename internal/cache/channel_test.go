package cache

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage/internal/partition"
)

// A write's payload reads back as its partition and write order; a reset,
// or anything else, is not a partition's.
func TestNotificationPayload(t *testing.T) {
	key := partition.Key{TopicID: uuid.MustParse("5f1a3c9e-6d1b-4c57-9a55-2f0e8b7d4c11"), Partition: 7}
	payload := notificationPayload(key, 42)
	require.Equal(t, "5f1a3c9e-6d1b-4c57-9a55-2f0e8b7d4c11/7/42", payload)
	got, order, ok := parseNotification(payload)
	require.True(t, ok)
	require.Equal(t, key, got)
	require.EqualValues(t, 42, order)
	for _, other := range []string{resetNotificationPrefix + "3", "5f1a3c9e-6d1b-4c57-9a55-2f0e8b7d4c11/7", "not-a-uuid/7/42", "5f1a3c9e-6d1b-4c57-9a55-2f0e8b7d4c11/x/42", "5f1a3c9e-6d1b-4c57-9a55-2f0e8b7d4c11/7/x"} {
		_, _, ok := parseNotification(other)
		require.False(t, ok, "%q", other)
	}
}
