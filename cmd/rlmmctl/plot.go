package main

// plot.go: `rlmmctl segments plot TOPIC PARTITION -o partition.svg`, a
// picture of a partition's offsets. Pure Go, no dependency: the SVG is
// written by hand.
//
// Layout, top to bottom: a title; lanes of bars (each segment a bar from its
// start to its end offset, one colour per leader epoch, so a segment that
// spans two epochs shows two; the state as the outline: dashed for
// COPY_SEGMENT_STARTED, solid for COPY_SEGMENT_FINISHED, hatched for
// DELETE_SEGMENT_STARTED); a band where lookups miss (offsets between the
// first and the last that no finished segment covers); the offset axis; the
// legend. Overlapping uploads are stacked greedily: a segment goes to the
// first lane where it overlaps nothing, so a shadowed upload shows in a
// lane below the one it overlaps.
//
// Bars narrower than minBarPx are merged into summary runs ("1,234
// segments, offsets a–b, epochs x–y"), so that 10,000 segments make a
// small, legible SVG: the element count is bounded by the pixel width, not
// the segment count.

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/krabka/remotestorage"
)

// plotSegment is what the plot needs of a segment.
type plotSegment struct {
	ID         uuid.UUID
	Start, End int64
	State      remotestorage.RemoteLogSegmentState
	Epochs     []epochView // ranges inside [Start, End], increasing
}

func plotSegmentOf(m remotestorage.RemoteLogSegmentMetadata) plotSegment {
	return plotSegment{ID: m.SegmentID.ID, Start: m.StartOffset, End: m.EndOffset, State: m.State,
		Epochs: epochRanges(m.SegmentLeaderEpochs, m.EndOffset)}
}

const (
	plotWidth   = 1400
	plotLeft    = 70
	plotRight   = 30
	plotTop     = 56
	laneHeight  = 26
	laneGap     = 6
	maxLanes    = 12 // deeper overlaps share the last lane
	minBarPx    = 2.0
	missBandPx  = 18
	axisPx      = 44
	legendRowPx = 22
)

// epochPalette: ten colours told apart by most colour-blind readers (Tableau 10).
var epochPalette = []string{"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#edc948", "#76b7b2", "#ff9da7", "#9c755f", "#e15759", "#bab0ac"}

func epochColour(e int32) string { return epochPalette[int(e)%len(epochPalette)] }

// plotStats says what the picture holds, for the command's summary line
// and for tests.
type plotStats struct {
	Segments  int // segments drawn
	Bars      int // segments drawn as their own bar
	Runs      int // summary runs
	InRuns    int // segments inside runs
	Lanes     int
	Misses    int    // offset ranges where lookups miss
	MissCount uint64 // offsets in them (up to 2^63: every offset)
	Bytes     int
}

// interval is an inclusive offset range.
type interval struct{ first, last int64 }

// lookupMisses returns the ranges of [min start, max end] that no finished
// segment covers: where a lookup of any epoch returns nothing.
func lookupMisses(segs []plotSegment) []interval {
	if len(segs) == 0 {
		return nil
	}
	lo, hi := segs[0].Start, segs[0].End
	var fin []interval
	for _, s := range segs {
		lo, hi = min(lo, s.Start), max(hi, s.End)
		if s.State == remotestorage.CopySegmentFinished {
			fin = append(fin, interval{s.Start, s.End})
		}
	}
	slices.SortFunc(fin, func(a, b interval) int { return cmpInt64(a.first, b.first) })
	var out []interval
	next := lo // first offset not yet known to be covered
	for _, f := range fin {
		if f.first > next {
			out = append(out, interval{next, f.first - 1})
		}
		if f.last >= next {
			if f.last == math.MaxInt64 {
				return out // covered to the last offset there is: next would overflow
			}
			next = f.last + 1
		}
	}
	if next <= hi {
		out = append(out, interval{next, hi})
	}
	return out
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// assignLanes stacks the segments greedily in list order (start offset,
// then add order): each goes to the first lane whose last segment ends
// before it starts.
func assignLanes(segs []plotSegment) []int {
	lanes := make([]int, len(segs))
	var ends []int64 // last end offset per lane
	for i, s := range segs {
		lane := -1
		for l, e := range ends {
			if e < s.Start {
				lane = l
				break
			}
		}
		if lane < 0 {
			if len(ends) < maxLanes {
				ends = append(ends, 0)
				lane = len(ends) - 1
			} else {
				lane = maxLanes - 1
			}
		}
		ends[lane] = max(ends[lane], s.End)
		lanes[i] = lane
	}
	return lanes
}

// stateStyle is how a state looks: the bar's opacity and outline.
func stateStyle(st remotestorage.RemoteLogSegmentState) (opacity string, stroke string) {
	switch st {
	case remotestorage.CopySegmentStarted:
		return "0.35", `stroke="#222" stroke-width="1.5" stroke-dasharray="5,3"`
	case remotestorage.DeleteSegmentStarted:
		return "0.6", `stroke="#222" stroke-width="1"`
	default:
		return "1", `stroke="#222" stroke-width="0.6"`
	}
}

func stateShort(st remotestorage.RemoteLogSegmentState) string {
	switch st {
	case remotestorage.CopySegmentStarted:
		return "copy started"
	case remotestorage.CopySegmentFinished:
		return "finished"
	case remotestorage.DeleteSegmentStarted:
		return "delete started"
	}
	return st.String()
}

// commas formats 1234567 as 1,234,567.
func commas[N int64 | uint64](n N) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func (a *app) segmentsPlotCommand() *cobra.Command {
	var out string
	cmd := acceptDashArgs(&cobra.Command{
		Use:   "plot TOPIC PARTITION -o partition.svg",
		Short: "Draw a partition's segments along the offset axis, as SVG",
		Long: `Draw the segments of one partition (those a broker's ListRemoteLogSegments
returns) as an SVG picture along the offset axis:

  - each segment a bar from its start to its end offset, coloured by leader
    epoch (a segment spanning two epochs shows both colours), its state as
    the outline: solid COPY_SEGMENT_FINISHED, dashed COPY_SEGMENT_STARTED,
    hatched DELETE_SEGMENT_STARTED;
  - overlapping uploads stacked in lanes below, so a shadowed segment shows;
  - in red, the offsets between the first and the last that no finished
    segment covers: where the brokers' lookups miss.

Bars narrower than 2 pixels are summarised as runs ("1,234 segments,
offsets a–b, epochs x–y"; hover in a browser), so the picture stays small
and legible at 10,000 segments.

TOPIC is a topic name or a topic id (UUID or Kafka's base64 form, also
one that starts with '-', as kafka-topics prints it). -o - writes to
stdout; a file is written whole or not at all. A topic name that starts
with '-' and a letter of a flag (-o, -h) goes after "--":
rlmmctl segments plot -o out.svg -- -orders 0.

` + databaseHelp,
		Example: `  rlmmctl segments plot orders 0 -o partition.svg
  chromium --headless --screenshot=partition.png --window-size=1400,400 file://$PWD/partition.svg`,
		Args: exactArgs(2, "a topic (name or id) and a partition number"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var partition int32
			if _, err := fmt.Sscan(args[1], &partition); err != nil || partition < 0 || fmt.Sprint(partition) != args[1] {
				return usageErrorf("partition %q: want a partition number, 0 or more", args[1])
			}
			if out == "" {
				return usageErrorf("-o is required: a file name, or - for stdout")
			}
			pf := partitionFlags{topic: args[0], partition: partition}
			pool, m, err := a.openManager(ctx)
			if err != nil {
				return err
			}
			defer func() { m.Close(); pool.Close() }()
			tp, err := pf.resolve(ctx, pool)
			// A name first: a 22-character topic name may also read as base64.
			if ee := (*exitError)(nil); errors.As(err, &ee) && ee.code == exitNotFound {
				if id, idErr := parseTopicID(args[0]); idErr == nil {
					pf = partitionFlags{parsedID: id, partition: partition}
					tp, err = pf.resolve(ctx, pool)
				}
			}
			if err != nil {
				return err
			}
			metas, err := m.ListRemoteLogSegments(ctx, tp)
			if err != nil {
				return err
			}
			if len(metas) == 0 {
				return notFoundErrorf("no segments to draw in %s", partitionLabel(tp))
			}
			segs := make([]plotSegment, len(metas))
			for i, s := range metas {
				segs[i] = plotSegmentOf(s)
			}
			title := fmt.Sprintf("%s-%d (topic id %s)", tp.Topic, tp.Partition, kafkaTopicID(tp.TopicID))
			var buf bytes.Buffer
			st, err := renderPlot(&buf, title, segs)
			if err != nil {
				return err
			}
			if out == "-" {
				_, err = a.stdout.Write(buf.Bytes())
				return err
			}
			if err := writeFileAtomic(out, buf.Bytes()); err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "wrote %s: %d segments (%d bars, %d in %d runs), %d lanes, %d ranges where lookups miss, %s\n",
				out, st.Segments, st.Bars, st.InRuns, st.Runs, st.Lanes, st.Misses, humanBytes(int64(st.Bytes)))
			return nil
		},
	})
	cmd.Flags().StringVarP(&out, "output", "o", "", "the SVG file to write (- for stdout)")
	return cmd
}

// writeFileAtomic writes data to a temporary file next to path and renames
// it into place: the file is whole or absent.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(f.Name()) //nolint:errcheck // gone after the rename
	if _, err := f.Write(data); err != nil {
		_ = f.Close() // the write failed already
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
