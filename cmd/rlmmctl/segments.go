package main

// segments.go: `rlmmctl segments list | get`. list goes through the
// library's PgManager, so it shows exactly what a broker's
// ListRemoteLogSegments[ByEpoch] returns; get reads the tables directly, so
// it also finds forgotten segments and shows the bookkeeping columns.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/cmd/rlmmctl/internal/ctldb"
)

func (a *app) segmentsCommand() *cobra.Command {
	cmd := groupCommand("segments", "List the segments of a partition, or show one segment",
		"List the segments of a partition as brokers see them, or show one segment by id.")
	cmd.AddCommand(a.segmentsListCommand(), a.segmentsGetCommand(), a.segmentsPlotCommand())
	return cmd
}

// openManager connects and builds a PgManager, which checks the schema
// version and says to run `rlmmctl migrate up` when it is wrong.
func (a *app) openManager(ctx context.Context) (*pgxpool.Pool, *remotestorage.PgManager, error) {
	pool, err := openPool(ctx, resolveDatabase(a.databaseURL), a.scrub, 2)
	if err != nil {
		return nil, nil, err
	}
	m, err := remotestorage.NewPgManager(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return pool, m, nil
}

// openedPartition is a manager over a pool of its own (see openManager) and
// the partition the flags name.
type openedPartition struct {
	pool *pgxpool.Pool
	m    *remotestorage.PgManager
	tp   remotestorage.TopicIDPartition
}

// Close releases the manager and the pool.
func (p *openedPartition) Close() {
	p.m.Close()
	p.pool.Close()
}

// openPartition opens a manager and resolves the partition the flags name.
func (a *app) openPartition(ctx context.Context, pf *partitionFlags) (*openedPartition, error) {
	pool, m, err := a.openManager(ctx)
	if err != nil {
		return nil, err
	}
	p := &openedPartition{pool: pool, m: m}
	if p.tp, err = pf.resolve(ctx, pool); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

func (a *app) segmentsListCommand() *cobra.Command {
	var pf partitionFlags
	var epoch int32
	var state string
	var format outputFormat
	cmd := &cobra.Command{
		Use:   "list --topic-id ID --partition N [--epoch E] [--state STATE]",
		Short: "List the segments of a partition, as ListRemoteLogSegments returns them",
		Long: `List the segments of one partition through the library, exactly as a
broker's ListRemoteLogSegments returns them (with --epoch:
ListRemoteLogSegmentsByEpoch): ordered by start offset, and without the
forgotten ones (DELETE_SEGMENT_FINISHED, or every segment once the
partition's delete finished; "rlmmctl segments get ID" still shows those).

--state keeps only the segments in that state: COPY_SEGMENT_STARTED,
COPY_SEGMENT_FINISHED or DELETE_SEGMENT_STARTED (also as 0, 1, 2, or
without the _SEGMENT part: copy_finished). Only COPY_SEGMENT_FINISHED
segments answer lookups.

EPOCHS shows each leader epoch's offset range inside the segment
(epoch:first-last), the ranges lookups match against.

` + databaseHelp,
		Example: `  rlmmctl segments list --topic-id b9Yw3cT7RIWqrVNH8pz5Ug --partition 0
  rlmmctl segments list --topic orders --partition 3 --epoch 7 --state COPY_SEGMENT_FINISHED -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if err := pf.validate(cmd); err != nil {
				return err
			}
			if err := format.check(); err != nil {
				return err
			}
			byEpoch := cmd.Flags().Changed("epoch")
			if byEpoch && epoch < 0 {
				return usageErrorf("--epoch %d: leader epochs start at 0", epoch)
			}
			var wantState *remotestorage.RemoteLogSegmentState
			if state != "" {
				s, err := parseSegmentState(state)
				if err != nil {
					return err
				}
				wantState = &s
			}
			op, err := a.openPartition(ctx, &pf)
			if err != nil {
				return err
			}
			defer op.Close()
			m, tp := op.m, op.tp
			var segs []remotestorage.RemoteLogSegmentMetadata
			if byEpoch {
				segs, err = m.ListRemoteLogSegmentsByEpoch(ctx, tp, remotestorage.LeaderEpoch(epoch))
			} else {
				segs, err = m.ListRemoteLogSegments(ctx, tp)
			}
			if err != nil {
				return err
			}
			views := []segmentView{}
			for _, s := range segs {
				if wantState == nil || s.State == *wantState {
					views = append(views, viewSegment(s))
				}
			}
			if format == formatJSON {
				return writeJSON(a.stdout, views)
			}
			if len(views) == 0 {
				fmt.Fprintf(a.stdout, "no segments in %s%s\n", partitionLabel(tp), listFilterText(byEpoch, epoch, state))
				return nil
			}
			fmt.Fprintf(a.stdout, "%d segments in %s%s\n", len(views), partitionLabel(tp), listFilterText(byEpoch, epoch, state))
			return writeSegmentTable(a.stdout, views)
		},
	}
	pf.register(cmd)
	cmd.Flags().Int32Var(&epoch, "epoch", 0, "only the segments that carry this leader epoch")
	cmd.Flags().StringVar(&state, "state", "", "only the segments in this state (e.g. COPY_SEGMENT_FINISHED)")
	addOutputFlag(cmd, &format)
	return cmd
}

func listFilterText(byEpoch bool, epoch int32, state string) string {
	var parts []string
	if byEpoch {
		parts = append(parts, fmt.Sprintf("carrying epoch %d", epoch))
	}
	if state != "" {
		parts = append(parts, "in state "+state)
	}
	if len(parts) == 0 {
		return ""
	}
	return ", " + strings.Join(parts, ", ")
}

// parseSegmentState accepts a state's name (any case, with or without the
// _SEGMENT infix) or its code.
func parseSegmentState(s string) (remotestorage.RemoteLogSegmentState, error) {
	norm := strings.ToUpper(strings.TrimSpace(s))
	if code, err := strconv.Atoi(norm); err == nil {
		if st := remotestorage.RemoteLogSegmentState(code); code >= 0 && code < 128 && st.Valid() {
			return st, nil
		}
	}
	for st := remotestorage.CopySegmentStarted; st.Valid(); st++ {
		name := st.String()
		if norm == name || norm == strings.Replace(name, "_SEGMENT", "", 1) {
			return st, nil
		}
	}
	return 0, usageErrorf("--state %q: want COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED or DELETE_SEGMENT_FINISHED", s)
}

func (a *app) segmentsGetCommand() *cobra.Command {
	var format outputFormat
	cmd := &cobra.Command{
		Use:   "get SEGMENT_ID",
		Short: "Show every field of one segment, forgotten or not",
		Long: `Show every stored field of one segment, found by its id (segment ids are
globally unique): its partition, state, offsets, leader epochs with their
offset ranges, size, broker, timestamps, custom metadata size, and when the
row was created and last written.

Unlike "segments list" this reads the tables directly, so it also shows
forgotten segments (DELETE_SEGMENT_FINISHED, or in a partition whose delete
finished), marked "forgotten: yes".

Exits with status 3 and "not found" when no segment has that id.

` + databaseHelp,
		Args: exactArgs(1, "one segment id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if err := format.check(); err != nil {
				return err
			}
			id, err := uuid.Parse(args[0])
			if err != nil {
				return usageErrorf("segment id %q is not a UUID", args[0])
			}
			pool, err := openPool(ctx, resolveDatabase(a.databaseURL), a.scrub, 2)
			if err != nil {
				return err
			}
			defer pool.Close()
			v, err := getSegment(ctx, pool, id)
			if err != nil {
				return err
			}
			if format == formatJSON {
				return writeJSON(a.stdout, v)
			}
			return writeSegmentDetail(a.stdout, v)
		},
	}
	addOutputFlag(cmd, &format)
	return cmd
}

// getSegment reads one segment and its partition's delete state.
func getSegment(ctx context.Context, pool ctldb.DBTX, id uuid.UUID) (segmentView, error) {
	r, err := queries.SegmentGet(ctx, pool, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return segmentView{}, notFoundErrorf("segment %s not found", id)
	}
	if err != nil {
		return segmentView{}, fmt.Errorf("read segment %s: %w", id, err)
	}
	m := remotestorage.RemoteLogSegmentMetadata{
		SegmentID: remotestorage.RemoteLogSegmentID{
			TopicIDPartition: remotestorage.TopicIDPartition{TopicID: r.TopicID, Topic: r.Topic, Partition: r.Partition},
			ID:               r.SegmentID,
		},
		StartOffset: r.StartOffset, EndOffset: r.EndOffset,
		MaxTimestampMs: r.MaxTimestampMs, BrokerID: r.BrokerID, EventTimestampMs: r.EventTimestampMs,
		SegmentSizeInBytes: r.SegmentSizeBytes, CustomMetadata: r.CustomMetadata,
		State: remotestorage.RemoteLogSegmentState(r.State), TxnIndexEmpty: r.TxnIndexEmpty,
		SegmentLeaderEpochs: make(map[remotestorage.LeaderEpoch]int64, len(r.Epochs)),
	}
	for i, e := range r.Epochs {
		m.SegmentLeaderEpochs[remotestorage.LeaderEpoch(e)] = r.EpochStartOffsets[i]
	}
	v := viewSegment(m)
	v.PartitionDeleteState = "NONE"
	partitionGone := false
	if r.DeleteState != nil {
		ds := remotestorage.RemotePartitionDeleteState(*r.DeleteState)
		v.PartitionDeleteState = ds.String()
		partitionGone = ds == remotestorage.DeletePartitionFinished
	}
	forgotten := m.State == remotestorage.DeleteSegmentFinished || partitionGone
	v.Forgotten = &forgotten
	v.CreatedAt, v.UpdatedAt = &r.CreatedAt, &r.UpdatedAt
	return v, nil
}
