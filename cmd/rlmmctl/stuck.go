package main

// stuck.go: `rlmmctl stuck --older-than 1h`, the work a crashed or stuck
// broker left behind (rlmm_stuck_v, through remotestorage.StuckWork).

import (
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/krabka/remotestorage"
)

// exitStuck: `stuck` found something (the list is on stdout). It shares
// the code of "not found": 3 is "the answer is not the happy one".
const exitStuck = 3

// stuckView is one line of `stuck`.
type stuckView struct {
	Kind         string     `json:"kind"`
	Topic        string     `json:"topic"`
	TopicID      uuid.UUID  `json:"topic_id"`
	TopicIDKafka string     `json:"topic_id_base64"`
	Partition    int32      `json:"partition"`
	SegmentID    *uuid.UUID `json:"segment_id,omitempty"`
	State        string     `json:"state"`
	BrokerID     int32      `json:"broker_id"`
	Since        time.Time  `json:"since"`
	AgeSeconds   float64    `json:"age_seconds"`
	EventTime    time.Time  `json:"event_time"`
	StartOffset  *int64     `json:"start_offset,omitempty"`
	EndOffset    *int64     `json:"end_offset,omitempty"`
	SizeBytes    *int64     `json:"size_bytes,omitempty"`
}

type stuckOutput struct {
	OlderThanSeconds float64     `json:"older_than_seconds"`
	Segments         int         `json:"segments"`
	Partitions       int         `json:"partitions"`
	Items            []stuckView `json:"items"`
}

func viewStuck(r remotestorage.StuckReport) stuckOutput {
	out := stuckOutput{OlderThanSeconds: r.OlderThan.Seconds(), Segments: r.Segments(), Partitions: r.Partitions(), Items: []stuckView{}}
	for _, it := range r.Items {
		v := stuckView{
			Kind: string(it.Kind), Topic: it.Partition.Topic, TopicID: it.Partition.TopicID,
			TopicIDKafka: kafkaTopicID(it.Partition.TopicID), Partition: it.Partition.Partition,
			State: it.State, BrokerID: it.BrokerID, Since: it.Since.UTC(), AgeSeconds: it.Age.Seconds(),
			EventTime: it.EventTime.UTC(),
		}
		if it.Kind == remotestorage.StuckSegment {
			id, start, end, size := it.SegmentID, it.StartOffset, it.EndOffset, it.SizeBytes
			v.SegmentID, v.StartOffset, v.EndOffset, v.SizeBytes = &id, &start, &end, &size
		}
		out.Items = append(out.Items, v)
	}
	return out
}

// formatAge is a duration for tables, to the second: 2h3m4s.
func formatAge(d time.Duration) string { return d.Round(time.Second).String() }

func (a *app) stuckCommand() *cobra.Command {
	var olderThan time.Duration
	var format outputFormat
	cmd := &cobra.Command{
		Use:   "stuck [--older-than 1h]",
		Short: "List the work a crashed or stuck broker left behind; exit 3 when there is some",
		Long: `List what has made no progress for longer than --older-than:

  - segments in COPY_SEGMENT_STARTED (an abandoned upload: its objects leak
    in remote storage until someone deletes them) or DELETE_SEGMENT_STARTED;
  - partitions in DELETE_PARTITION_MARKED or DELETE_PARTITION_STARTED.

Each line names the broker that wrote the latest state and the age, on the
database's clock (since the row's updated_at; every write, a manual repair
included, restarts it); EVENT_TIME is the broker's own clock for the same
write. Segments of a partition whose delete finished are forgotten and not
listed. The same rows are in the view rlmm_stuck_v, for psql.

Exit status 3 when something is stuck (the list is on stdout), 0 when
nothing is, so that a cron job or a probe can alert on it.

` + databaseHelp,
		Example: `  rlmmctl stuck --older-than 1h
  rlmmctl stuck --older-than 30m --format json | jq '.items[] | select(.kind == "segment")'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if err := format.check(); err != nil {
				return err
			}
			if olderThan < 0 {
				return usageErrorf("--older-than %s: want a duration of 0 or more, e.g. 1h or 30m", olderThan)
			}
			pool, err := openPool(ctx, resolveDatabase(a.databaseURL), a.scrub, 2)
			if err != nil {
				return err
			}
			defer pool.Close()
			r, err := remotestorage.StuckWork(ctx, pool, olderThan)
			if err != nil {
				return err
			}
			if err := a.writeStuck(format, r); err != nil {
				return err
			}
			if len(r.Items) > 0 {
				return &exitError{code: exitStuck, err: fmt.Errorf("%d stuck", len(r.Items)), quiet: true}
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&olderThan, "older-than", time.Hour, "list what has made no progress for longer than this (e.g. 1h, 30m; 0: everything in flight)")
	addOutputFlag(cmd, &format)
	// --format is the spelling; -o/--output the other commands'.
	cmd.Flags().StringVar((*string)(&format), "format", string(formatTable), "the same as --output: table or json")
	return cmd
}

func (a *app) writeStuck(format outputFormat, r remotestorage.StuckReport) error {
	if format == formatJSON {
		return writeJSON(a.stdout, viewStuck(r))
	}
	if len(r.Items) == 0 {
		fmt.Fprintf(a.stdout, "nothing stuck for longer than %s\n", r.OlderThan)
		return nil
	}
	fmt.Fprintf(a.stdout, "%d segments and %d partitions stuck for longer than %s (age on the database clock)\n",
		r.Segments(), r.Partitions(), r.OlderThan)
	tw := newTable(a.stdout)
	fmt.Fprintln(tw, "KIND\tTOPIC\tPARTITION\tSTATE\tBROKER\tAGE\tSINCE_UTC\tEVENT_TIME_UTC\tSEGMENT_ID\tOFFSETS\tSIZE")
	for _, it := range r.Items {
		seg, offsets, size := "-", "-", "-"
		if it.Kind == remotestorage.StuckSegment {
			seg = it.SegmentID.String()
			offsets = fmt.Sprintf("%d-%d", it.StartOffset, it.EndOffset)
			size = humanBytes(it.SizeBytes)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", it.Kind, it.Partition.Topic, it.Partition.Partition,
			it.State, it.BrokerID, formatAge(it.Age), it.Since.UTC().Format(time.DateTime),
			it.EventTime.UTC().Format(time.DateTime), seg, offsets, size)
	}
	return tw.Flush()
}
