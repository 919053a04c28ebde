package main

// partitions.go: `rlmmctl partitions list`, one line per partition the
// store knows: how many segments are in each state, how many bytes are in
// remote storage, and whether the partition is being deleted. One SQL
// aggregate over the tables: the library has no such query, and brokers
// never need one.

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/cmd/rlmmctl/internal/ctldb"
)

// partitionSummary is one line of `partitions list`.
type partitionSummary struct {
	Topic        string    `json:"topic"`
	TopicID      uuid.UUID `json:"topic_id"`
	TopicIDKafka string    `json:"topic_id_base64"`
	Partition    int32     `json:"partition"`
	// Segments per state name; every state is present, 0 when none.
	Segments map[string]int64 `json:"segments"`
	// LiveBytes sums the sizes of the segments not forgotten: what is in
	// remote storage or on its way in or out.
	LiveBytes   int64     `json:"live_bytes"`
	DeleteState string    `json:"delete_state"`
	LastChange  time.Time `json:"last_change"`
}

// segmentCount returns the count of segments in state s.
func (p partitionSummary) segmentCount(s remotestorage.RemoteLogSegmentState) int64 {
	return p.Segments[s.String()]
}

// partitionFilter restricts listPartitions; zero values mean everything.
type partitionFilter struct {
	topic   string
	topicID uuid.UUID
}

// listPartitions aggregates the tables per partition.
func listPartitions(ctx context.Context, pool ctldb.DBTX, f partitionFilter) ([]partitionSummary, error) {
	var topic *string
	if f.topic != "" {
		topic = &f.topic
	}
	// The topic ids to summarise, found through an index each.
	var ids []uuid.UUID
	var err error
	switch {
	case f.topicID != uuid.Nil:
		ids = []uuid.UUID{f.topicID}
	case topic != nil:
		ids, err = queries.PartitionTopicIDs(ctx, pool, *topic)
	default:
		ids, err = queries.AllTopicIDs(ctx, pool)
	}
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	rows, err := queries.PartitionsSummary(ctx, pool, ctldb.PartitionsSummaryParams{TopicIds: ids, Topic: topic})
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	out := make([]partitionSummary, 0, len(rows))
	for _, r := range rows {
		p := partitionSummary{Topic: r.Topic, TopicID: r.TopicID, TopicIDKafka: kafkaTopicID(r.TopicID),
			Partition: r.Partition, LiveBytes: r.LiveBytes, LastChange: r.LastChange}
		counts := [...]int64{r.CopyStarted, r.CopyFinished, r.DeleteStarted, r.DeleteFinished}
		p.Segments = make(map[string]int64, len(counts))
		for i, n := range counts {
			p.Segments[remotestorage.RemoteLogSegmentState(i).String()] = n
		}
		p.DeleteState = "NONE"
		if r.DeleteState != nil {
			p.DeleteState = remotestorage.RemotePartitionDeleteState(*r.DeleteState).String()
		}
		out = append(out, p)
	}
	return out, nil
}

func (a *app) partitionsCommand() *cobra.Command {
	cmd := groupCommand("partitions", "Summarise the partitions the store knows",
		"Summarise the partitions the store knows.")
	cmd.AddCommand(a.partitionsListCommand())
	return cmd
}

func (a *app) partitionsListCommand() *cobra.Command {
	var topic, topicID string
	var format outputFormat
	cmd := &cobra.Command{
		Use:   "list [--topic NAME | --topic-id ID]",
		Short: "One line per partition: segments per state, bytes, delete state, last change",
		Long: `One line per partition that has ever had a segment or a partition-delete
record: its topic, number and topic id (UUID and Kafka's base64 form); how
many segment rows are in each state (COPY_STARTED, COPY_FINISHED,
DELETE_STARTED, DELETE_FINISHED); BYTES, the summed size of the segments
not forgotten (what remote storage holds or is copying or deleting); the
partition-delete state; and the time of the last write.

DELETE_FINISHED rows are forgotten by the brokers but kept until
"rlmmctl purge" compacts or drops them.

` + databaseHelp,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if err := format.check(); err != nil {
				return err
			}
			f := partitionFilter{topic: topic}
			if topicID != "" {
				id, err := parseTopicID(topicID)
				if err != nil {
					return &exitError{code: exitUsage, err: err}
				}
				f.topicID = id
			}
			pool, err := openPool(ctx, resolveDatabase(a.databaseURL), a.scrub, 2)
			if err != nil {
				return err
			}
			defer pool.Close()
			parts, err := listPartitions(ctx, pool, f)
			if err != nil {
				return err
			}
			if format == formatJSON {
				return writeJSON(a.stdout, parts)
			}
			if len(parts) == 0 {
				fmt.Fprintln(a.stdout, "no partitions")
				return nil
			}
			tw := newTable(a.stdout)
			fmt.Fprintln(tw, "TOPIC\tPARTITION\tTOPIC_ID\tKAFKA_TOPIC_ID\tCOPY_STARTED\tCOPY_FINISHED\tDELETE_STARTED\tDELETE_FINISHED\tBYTES\tDELETE_STATE\tLAST_CHANGE_UTC")
			for _, p := range parts {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", p.Topic, p.Partition, p.TopicID, p.TopicIDKafka,
					p.segmentCount(remotestorage.CopySegmentStarted), p.segmentCount(remotestorage.CopySegmentFinished),
					p.segmentCount(remotestorage.DeleteSegmentStarted), p.segmentCount(remotestorage.DeleteSegmentFinished),
					humanBytes(p.LiveBytes), p.DeleteState, p.LastChange.UTC().Format(time.DateTime))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&topic, "topic", "", "only the partitions of this topic name")
	cmd.Flags().StringVar(&topicID, "topic-id", "", "only the partitions of this topic id (UUID or Kafka's base64 form)")
	addOutputFlag(cmd, &format)
	return cmd
}
