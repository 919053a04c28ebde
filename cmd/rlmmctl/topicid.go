package main

// topicid.go: topic ids in the two spellings operators meet. The library and
// the database use canonical UUIDs; Kafka's tools (kafka-topics --describe,
// the broker logs) print the same 16 bytes as URL-safe base64 without
// padding, e.g. "b9Yw3cT7RIWqrVNH8pz5Ug". Accepting both saves a conversion
// by hand in the middle of an incident.

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/cmd/rlmmctl/internal/ctldb"
)

// kafkaTopicIDLen is the length of a topic id in Kafka's base64 form.
const kafkaTopicIDLen = 22

// parseTopicID accepts a canonical UUID or Kafka's base64 form.
func parseTopicID(s string) (uuid.UUID, error) {
	s = strings.TrimSpace(s)
	var id uuid.UUID
	switch {
	case len(s) == kafkaTopicIDLen:
		// Base64 never has 36 characters and a UUID never 22, so the length
		// alone tells the forms apart.
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil {
			return uuid.Nil, fmt.Errorf("topic id %q: not a UUID, and not Kafka's base64 form: %v", s, err)
		}
		copy(id[:], b)
	default:
		var err error
		if id, err = uuid.Parse(s); err != nil {
			return uuid.Nil, fmt.Errorf("topic id %q: want a UUID (1b2c3d4e-…) or Kafka's 22-character base64 form (b9Yw3cT7RIWqrVNH8pz5Ug)", s)
		}
	}
	if id == uuid.Nil {
		// Kafka reserves the zero UUID; the library refuses it too.
		return uuid.Nil, fmt.Errorf("topic id %q is the zero UUID, which Kafka reserves", s)
	}
	return id, nil
}

// kafkaTopicID returns id as Kafka prints it.
func kafkaTopicID(id uuid.UUID) string {
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// bothTopicIDForms returns "uuid (kafka form)" for reports.
func bothTopicIDForms(id uuid.UUID) string {
	return id.String() + " (" + kafkaTopicID(id) + ")"
}

// partitionFlags selects one partition: --topic-id (either form) or --topic
// (the name, looked up in rlmm_partitions), and --partition.
type partitionFlags struct {
	topicID   string
	topic     string
	partition int32

	parsedID uuid.UUID
}

func (f *partitionFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.topicID, "topic-id", "", "topic id: a UUID or Kafka's base64 form (this or --topic is required)")
	cmd.Flags().StringVar(&f.topic, "topic", "", "topic name, resolved to its id through the database (instead of --topic-id)")
	cmd.Flags().Int32Var(&f.partition, "partition", -1, "partition number (required)")
}

// validate checks the flags before anything connects, so a typo is a usage
// error whether or not the database is reachable.
func (f *partitionFlags) validate(cmd *cobra.Command) error {
	switch {
	case f.topicID == "" && f.topic == "":
		return usageErrorf("one of --topic-id or --topic is required")
	case f.topicID != "" && f.topic != "":
		return usageErrorf("give --topic-id or --topic, not both")
	case !cmd.Flags().Changed("partition"):
		return usageErrorf("--partition is required")
	case f.partition < 0:
		return usageErrorf("--partition %d: partitions are numbered from 0", f.partition)
	}
	if f.topicID != "" {
		id, err := parseTopicID(f.topicID)
		if err != nil {
			return &exitError{code: exitUsage, err: err}
		}
		f.parsedID = id
	}
	return nil
}

// resolve returns the partition, with its topic name when the database
// knows it (the library's queries need only the id; the name is for people).
func (f *partitionFlags) resolve(ctx context.Context, pool ctldb.DBTX) (remotestorage.TopicIDPartition, error) {
	tp := remotestorage.TopicIDPartition{TopicID: f.parsedID, Topic: f.topic, Partition: f.partition}
	if f.topic == "" {
		name, err := queries.PartitionTopicName(ctx, pool, tp.TopicID)
		if err == nil {
			tp.Topic = name
		}
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return tp, fmt.Errorf("read the topic name of %s: %w", tp.TopicID, err)
		}
		return tp, nil
	}
	// A deleted and recreated topic keeps its name but gets a new id, so a
	// name can stand for several ids.
	ids, err := queries.PartitionTopicIDs(ctx, pool, f.topic)
	if err != nil {
		return tp, fmt.Errorf("look up topic %q: %w", f.topic, err)
	}
	switch len(ids) {
	case 0:
		return tp, notFoundErrorf("no topic named %q in the database", f.topic)
	case 1:
		tp.TopicID = ids[0]
		return tp, nil
	}
	forms := make([]string, len(ids))
	for i, id := range ids {
		forms[i] = bothTopicIDForms(id)
	}
	return tp, usageErrorf("topic %q has %d ids (deleted and recreated?): %s; pick one with --topic-id",
		f.topic, len(ids), strings.Join(forms, ", "))
}

// partitionLabel names a partition for people: "orders-3 (topic id …)".
func partitionLabel(tp remotestorage.TopicIDPartition) string {
	name := tp.Topic
	if name == "" {
		name = "(unknown topic)"
	}
	return fmt.Sprintf("%s-%d (topic id %s)", name, tp.Partition, bothTopicIDForms(tp.TopicID))
}
