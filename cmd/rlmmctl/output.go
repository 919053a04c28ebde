package main

// output.go: how rlmmctl shows things. Tables for people, JSON (-o json)
// for scripts; both come from the same view structs so they never disagree.

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/krabka/remotestorage"
)

// outputFormat is the -o flag.
type outputFormat string

const (
	formatTable outputFormat = "table"
	formatJSON  outputFormat = "json"
)

func addOutputFlag(cmd *cobra.Command, f *outputFormat) {
	*f = formatTable
	cmd.Flags().StringVarP((*string)(f), "output", "o", string(formatTable), "output format: table or json")
}

func (f outputFormat) check() error {
	if f != formatTable && f != formatJSON {
		return usageErrorf("--output %q: want table or json", string(f))
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// epochView is the range of one leader epoch inside a segment.
type epochView struct {
	Epoch       int32 `json:"epoch"`
	FirstOffset int64 `json:"first_offset"`
	LastOffset  int64 `json:"last_offset"`
}

// segmentView is a segment as rlmmctl shows it.
type segmentView struct {
	SegmentID        uuid.UUID   `json:"segment_id"`
	Topic            string      `json:"topic"`
	TopicID          uuid.UUID   `json:"topic_id"`
	TopicIDKafka     string      `json:"topic_id_base64"`
	Partition        int32       `json:"partition"`
	State            string      `json:"state"`
	StartOffset      int64       `json:"start_offset"`
	EndOffset        int64       `json:"end_offset"`
	LeaderEpochs     []epochView `json:"leader_epochs"`
	SegmentSizeBytes int32       `json:"segment_size_bytes"`
	MaxTimestampMs   int64       `json:"max_timestamp_ms"`
	BrokerID         int32       `json:"broker_id"`
	EventTimestampMs int64       `json:"event_timestamp_ms"`
	CustomMetadata   []byte      `json:"custom_metadata"` // base64 in JSON
	TxnIndexEmpty    bool        `json:"txn_index_empty"`

	// Only `segments get` reads these, straight from the tables.
	PartitionDeleteState string     `json:"partition_delete_state,omitempty"`
	Forgotten            *bool      `json:"forgotten,omitempty"`
	CreatedAt            *time.Time `json:"created_at,omitempty"`
	UpdatedAt            *time.Time `json:"updated_at,omitempty"`
}

func viewSegment(m remotestorage.RemoteLogSegmentMetadata) segmentView {
	tp := m.SegmentID.TopicIDPartition
	return segmentView{
		SegmentID:        m.SegmentID.ID,
		Topic:            tp.Topic,
		TopicID:          tp.TopicID,
		TopicIDKafka:     kafkaTopicID(tp.TopicID),
		Partition:        tp.Partition,
		State:            m.State.String(),
		StartOffset:      m.StartOffset,
		EndOffset:        m.EndOffset,
		LeaderEpochs:     epochRanges(m.SegmentLeaderEpochs, m.EndOffset),
		SegmentSizeBytes: m.SegmentSizeInBytes,
		MaxTimestampMs:   m.MaxTimestampMs,
		BrokerID:         m.BrokerID,
		EventTimestampMs: m.EventTimestampMs,
		CustomMetadata:   m.CustomMetadata,
		TxnIndexEmpty:    m.TxnIndexEmpty,
	}
}

// epochRanges turns epoch -> first offset into ranges: an epoch runs until
// the next epoch starts, the last one until the segment's end. This is the
// range the brokers' lookups match against, so showing it explains them.
func epochRanges(epochs map[remotestorage.LeaderEpoch]int64, endOffset int64) []epochView {
	keys := slices.Sorted(maps.Keys(epochs))
	out := make([]epochView, len(keys))
	for i, e := range keys {
		last := endOffset
		if i+1 < len(keys) {
			last = epochs[keys[i+1]] - 1
		}
		out[i] = epochView{Epoch: int32(e), FirstOffset: epochs[e], LastOffset: last}
	}
	return out
}

// epochsCell is the compact table form: "0:100-199 1:200-299".
func epochsCell(epochs []epochView) string {
	parts := make([]string, len(epochs))
	for i, e := range epochs {
		parts[i] = fmt.Sprintf("%d:%d-%d", e.Epoch, e.FirstOffset, e.LastOffset)
	}
	return strings.Join(parts, " ")
}

// writeSegmentTable prints one line per segment.
func writeSegmentTable(w io.Writer, segs []segmentView) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "SEGMENT_ID\tSTATE\tSTART\tEND\tEPOCHS(epoch:first-last)\tSIZE\tBROKER\tEVENT_TIME")
	for _, s := range segs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%d\t%s\n", s.SegmentID, s.State, s.StartOffset, s.EndOffset,
			epochsCell(s.LeaderEpochs), humanBytes(int64(s.SegmentSizeBytes)), s.BrokerID, formatMillis(s.EventTimestampMs))
	}
	return tw.Flush()
}

// writeSegmentDetail prints every field of one segment, one per line.
func writeSegmentDetail(w io.Writer, s segmentView) error {
	tw := newTable(w)
	row := func(k, format string, args ...any) {
		fmt.Fprintf(tw, "%s:\t"+format+"\n", append([]any{k}, args...)...)
	}
	row("segment id", "%s", s.SegmentID)
	row("topic", "%s", s.Topic)
	row("topic id", "%s", bothTopicIDForms(s.TopicID))
	row("partition", "%d", s.Partition)
	row("state", "%s", s.State)
	if s.PartitionDeleteState != "" {
		row("partition delete state", "%s", s.PartitionDeleteState)
	}
	if s.Forgotten != nil {
		row("forgotten", "%s", yesNo(*s.Forgotten))
	}
	row("offsets", "%d-%d (%d offsets)", s.StartOffset, s.EndOffset, s.EndOffset-s.StartOffset+1)
	for _, e := range s.LeaderEpochs {
		row("leader epoch "+fmt.Sprint(e.Epoch), "offsets %d-%d", e.FirstOffset, e.LastOffset)
	}
	row("size", "%s (%d bytes)", humanBytes(int64(s.SegmentSizeBytes)), s.SegmentSizeBytes)
	row("max timestamp", "%s (%d)", formatMillis(s.MaxTimestampMs), s.MaxTimestampMs)
	row("broker id", "%d", s.BrokerID)
	row("event time", "%s (%d)", formatMillis(s.EventTimestampMs), s.EventTimestampMs)
	if s.CustomMetadata == nil {
		row("custom metadata", "none")
	} else {
		row("custom metadata", "%d bytes", len(s.CustomMetadata))
	}
	row("txn index empty", "%t", s.TxnIndexEmpty)
	if s.CreatedAt != nil {
		row("created at", "%s", s.CreatedAt.UTC().Format(time.RFC3339Nano))
	}
	if s.UpdatedAt != nil {
		row("updated at", "%s", s.UpdatedAt.UTC().Format(time.RFC3339Nano))
	}
	return tw.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// formatMillis shows a Kafka timestamp (ms since the epoch) in UTC.
func formatMillis(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

// humanBytes is a size in binary units, for tables.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
