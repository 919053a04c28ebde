package main

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestTopicIDRoundTrip(t *testing.T) {
	t.Parallel()
	for range 100 {
		id := uuid.New()
		kafka := kafkaTopicID(id)
		require.Len(t, kafka, kafkaTopicIDLen)
		fromKafka, err := parseTopicID(kafka)
		require.NoError(t, err)
		require.Equal(t, id, fromKafka)
		fromUUID, err := parseTopicID(id.String())
		require.NoError(t, err)
		require.Equal(t, id, fromUUID)
	}
}

func TestTopicIDKafkaExample(t *testing.T) {
	t.Parallel()
	// The form kafka-topics --describe prints: URL-safe base64, no padding.
	id, err := parseTopicID("b9Yw3cT7RIWqrVNH8pz5Ug")
	require.NoError(t, err)
	require.Equal(t, "6fd630dd-c4fb-4485-aaad-5347f29cf952", id.String())
	require.Equal(t, "b9Yw3cT7RIWqrVNH8pz5Ug", kafkaTopicID(id))
	// The URL-safe alphabet: "-" and "_" appear in Kafka's ids.
	id, err = parseTopicID("hk-GfX-4T_ST4xpx1S8deg")
	require.NoError(t, err)
	require.Equal(t, "hk-GfX-4T_ST4xpx1S8deg", kafkaTopicID(id))
}

func TestTopicIDRejects(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		"",
		"orders",
		"b9Yw3cT7RIWqrVNH8pz5U",                // 21 characters
		"b9Yw3cT7RIWqrVNH8pz5U!",               // not base64
		"AAAAAAAAAAAAAAAAAAAAAA",               // the zero UUID, in Kafka's form
		"00000000-0000-0000-0000-000000000000", // the zero UUID
		"6fd630dd-c4fb-4485-aaad-5347f29cf95",  // a UUID one digit short
	} {
		_, err := parseTopicID(bad)
		require.Error(t, err, "%q", bad)
	}
}
