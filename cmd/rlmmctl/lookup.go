package main

// lookup.go: `rlmmctl lookup` and `rlmmctl highest-offset`, the two
// questions a broker asks the store when it serves a fetch from remote
// storage or truncates its log, answered through the library so that the
// operator sees exactly the broker's answer.

import (
	"fmt"
	"maps"
	"slices"

	"github.com/spf13/cobra"

	"github.com/krabka/remotestorage"
)

func (a *app) lookupCommand() *cobra.Command {
	var pf partitionFlags
	var epoch int32
	var offset int64
	var format outputFormat
	cmd := &cobra.Command{
		Use:   "lookup --topic-id ID --partition N --epoch E --offset O",
		Short: "Find the segment that holds an offset of a leader epoch, as a broker would",
		Long: `Find the segment that holds offset O of leader epoch E, through the
library's RemoteLogSegmentMetadata: the same answer a broker gets when it
serves a fetch from remote storage.

Only COPY_SEGMENT_FINISHED segments answer, and only for the offset range
that epoch E covers inside them ("segments list" shows the ranges). Where
several segments overlap, the one whose range of E starts latest wins.

Exit status: 0 and the segment when one holds the offset; 3 and
"no segment holds offset O of epoch E …" on stdout when none does (a miss is
an answer, not a failure: scripts test $? = 3); 1 when the lookup failed.

` + databaseHelp,
		Example: `  rlmmctl lookup --topic-id b9Yw3cT7RIWqrVNH8pz5Ug --partition 0 --epoch 3 --offset 12345
  rlmmctl lookup --topic orders --partition 0 --epoch 3 --offset 12345 -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if err := pf.validate(cmd); err != nil {
				return err
			}
			if err := format.check(); err != nil {
				return err
			}
			switch {
			case !cmd.Flags().Changed("epoch"):
				return usageErrorf("--epoch is required")
			case !cmd.Flags().Changed("offset"):
				return usageErrorf("--offset is required")
			case epoch < 0:
				return usageErrorf("--epoch %d: leader epochs start at 0", epoch)
			case offset < 0:
				return usageErrorf("--offset %d: offsets start at 0", offset)
			}
			op, err := a.openPartition(ctx, &pf)
			if err != nil {
				return err
			}
			defer op.Close()
			m, tp := op.m, op.tp
			seg, found, err := m.RemoteLogSegmentMetadata(ctx, tp, remotestorage.LeaderEpoch(epoch), offset)
			if err != nil {
				return err
			}
			if format == formatJSON {
				answer := struct {
					Found   bool         `json:"found"`
					Epoch   int32        `json:"epoch"`
					Offset  int64        `json:"offset"`
					Segment *segmentView `json:"segment,omitempty"`
				}{Found: found, Epoch: epoch, Offset: offset}
				if found {
					v := viewSegment(seg)
					answer.Segment = &v
				}
				if err := writeJSON(a.stdout, answer); err != nil {
					return err
				}
			} else if found {
				fmt.Fprintf(a.stdout, "offset %d of epoch %d in %s is in segment %s\n", offset, epoch, partitionLabel(tp), seg.SegmentID.ID)
				if err := writeSegmentDetail(a.stdout, viewSegment(seg)); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(a.stdout, "no segment holds offset %d of epoch %d in %s\n", offset, epoch, partitionLabel(tp))
			}
			if !found {
				return errAnsweredNotFound
			}
			return nil
		},
	}
	pf.register(cmd)
	cmd.Flags().Int32Var(&epoch, "epoch", 0, "leader epoch (required)")
	cmd.Flags().Int64Var(&offset, "offset", 0, "offset (required)")
	addOutputFlag(cmd, &format)
	return cmd
}

func (a *app) highestOffsetCommand() *cobra.Command {
	var pf partitionFlags
	var epoch int32
	var format outputFormat
	cmd := &cobra.Command{
		Use:   "highest-offset --topic-id ID --partition N [--epoch E]",
		Short: "Show the highest offset in remote storage for a leader epoch",
		Long: `Show the highest offset of leader epoch E in remote storage, through the
library's HighestOffsetForEpoch: the largest end offset of the
COPY_SEGMENT_FINISHED segments that carry E. Without --epoch, show it for
every epoch the partition's segments carry.

Exit status: 0 with the offset; 3 and "no finished segment carries epoch E"
on stdout when there is none (with --epoch), or when the partition has no
segments at all (without it); 1 on failure.

` + databaseHelp,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if err := pf.validate(cmd); err != nil {
				return err
			}
			if err := format.check(); err != nil {
				return err
			}
			oneEpoch := cmd.Flags().Changed("epoch")
			if oneEpoch && epoch < 0 {
				return usageErrorf("--epoch %d: leader epochs start at 0", epoch)
			}
			op, err := a.openPartition(ctx, &pf)
			if err != nil {
				return err
			}
			defer op.Close()
			m, tp := op.m, op.tp
			epochs := []remotestorage.LeaderEpoch{remotestorage.LeaderEpoch(epoch)}
			if !oneEpoch {
				segs, err := m.ListRemoteLogSegments(ctx, tp)
				if err != nil {
					return err
				}
				seen := map[remotestorage.LeaderEpoch]bool{}
				for _, s := range segs {
					for e := range s.SegmentLeaderEpochs {
						seen[e] = true
					}
				}
				epochs = slices.Sorted(maps.Keys(seen))
			}
			type answer struct {
				Epoch         int32  `json:"epoch"`
				Found         bool   `json:"found"`
				HighestOffset *int64 `json:"highest_offset,omitempty"`
			}
			answers := []answer{}
			for _, e := range epochs {
				off, found, err := m.HighestOffsetForEpoch(ctx, tp, e)
				if err != nil {
					return err
				}
				ans := answer{Epoch: int32(e), Found: found}
				if found {
					ans.HighestOffset = &off
				}
				answers = append(answers, ans)
			}
			switch {
			case format == formatJSON && oneEpoch:
				if err := writeJSON(a.stdout, answers[0]); err != nil {
					return err
				}
			case format == formatJSON:
				if err := writeJSON(a.stdout, answers); err != nil {
					return err
				}
			case len(answers) == 0:
				fmt.Fprintf(a.stdout, "no segments in %s\n", partitionLabel(tp))
			default:
				fmt.Fprintf(a.stdout, "highest offsets in remote storage of %s:\n", partitionLabel(tp))
				tw := newTable(a.stdout)
				fmt.Fprintln(tw, "EPOCH\tHIGHEST_OFFSET")
				for _, ans := range answers {
					if ans.Found {
						fmt.Fprintf(tw, "%d\t%d\n", ans.Epoch, *ans.HighestOffset)
					} else {
						fmt.Fprintf(tw, "%d\tnone: no finished segment carries epoch %d\n", ans.Epoch, ans.Epoch)
					}
				}
				if err := tw.Flush(); err != nil {
					return err
				}
			}
			if (oneEpoch && !answers[0].Found) || (!oneEpoch && len(answers) == 0) {
				return errAnsweredNotFound
			}
			return nil
		},
	}
	pf.register(cmd)
	cmd.Flags().Int32Var(&epoch, "epoch", 0, "leader epoch (default: every epoch of the partition)")
	addOutputFlag(cmd, &format)
	return cmd
}
