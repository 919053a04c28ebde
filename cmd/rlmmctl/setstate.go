package main

// setstate.go: the legal way to repair a state by hand. `segments
// set-state` and `partitions set-delete-state` call the database's repair
// functions (rlmm_set_segment_state, rlmm_set_partition_delete_state; see
// docs/DBA.md), which a DBA may call from psql too: a repair is checked
// against the transition tables that copy statemachine.go and does
// everything a broker's write does: the epoch rows follow, the write is
// stamped for the change feed, and the brokers' caches are notified. They need the
// DBA role's EXECUTE (rlmmctl roles sql), not write access to the tables.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/cobra"

	"github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/cmd/rlmmctl/internal/ctldb"
)

// operatorBrokerID is the broker id recorded for a repair unless
// --broker-id says otherwise: no Kafka broker has a negative id.
const operatorBrokerID = -1

// addRepairCommands adds the repair subcommands to the segments and
// partitions groups of root.
func (a *app) addRepairCommands(root *cobra.Command) {
	for _, c := range root.Commands() {
		switch c.Name() {
		case "segments":
			c.AddCommand(a.segmentsSetStateCommand())
		case "partitions":
			c.AddCommand(a.partitionsSetDeleteStateCommand())
		}
	}
}

func (a *app) segmentsSetStateCommand() *cobra.Command {
	var brokerID int32
	var eventTimeMs int64
	cmd := &cobra.Command{
		Use:   "set-state SEGMENT_ID STATE",
		Short: "Move a segment to a state through the repair function: the legal manual repair",
		Long: `Move one segment to STATE as a broker would, through the database's repair
function rlmm_set_segment_state (docs/DBA.md): the transition is checked
against the segment state machine, and on success the segment's epoch rows,
its write order and the brokers' caches follow, in one call.

STATE is COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED or
DELETE_SEGMENT_FINISHED (also as 1, 2, 3, or without the _SEGMENT part:
copy_finished). The allowed transitions:

  COPY_SEGMENT_STARTED   -> COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED
  COPY_SEGMENT_FINISHED  -> DELETE_SEGMENT_STARTED
  DELETE_SEGMENT_STARTED -> DELETE_SEGMENT_FINISHED

and a segment's current state again, which changes nothing. Nothing moves
back to COPY_SEGMENT_STARTED.

The write is recorded with --broker-id (default -1: an operator) and
--event-time-ms (default now). The custom metadata is kept.

Exit status: 0 when the segment is in STATE; 1 when the state machine
forbids the transition (the message says which states are allowed) or the
write failed; 3 when no segment has that id, or its partition was deleted.

` + databaseHelp,
		Example: `  rlmmctl segments set-state 0b7f4c1e-3f0a-4c55-9d0e-6a3f1c2b9e11 DELETE_SEGMENT_STARTED
  rlmmctl segments set-state 0b7f4c1e-3f0a-4c55-9d0e-6a3f1c2b9e11 copy_finished --broker-id 3`,
		Args: exactArgs(2, "a segment id and a state"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			id, err := uuid.Parse(args[0])
			if err != nil {
				return usageErrorf("segment id %q is not a UUID", args[0])
			}
			state, err := parseSegmentState(args[1])
			if err != nil {
				return usageErrorf("state %q: want COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED or DELETE_SEGMENT_FINISHED", args[1])
			}
			if !cmd.Flags().Changed("event-time-ms") {
				eventTimeMs = time.Now().UnixMilli()
			}
			// The manager is opened for its schema check: the function
			// is part of the schema it accepts.
			pool, m, err := a.openManager(ctx)
			if err != nil {
				return err
			}
			defer pool.Close()
			defer m.Close()

			loc, err := queries.SegmentLocate(ctx, pool, id)
			if errors.Is(err, pgx.ErrNoRows) {
				return notFoundErrorf("segment %s not found", id)
			}
			if err != nil {
				return fmt.Errorf("read segment %s: %w", id, err)
			}
			tp := remotestorage.TopicIDPartition{TopicID: loc.TopicID, Topic: loc.Topic, Partition: loc.Partition}
			from := remotestorage.RemoteLogSegmentState(loc.State)
			if _, err := pool.Exec(ctx, `SELECT rlmm_set_segment_state($1, $2, $3, $4)`, id, state.String(), brokerID, eventTimeMs); err != nil {
				return repairError("segment state transition", err)
			}
			if from == state {
				fmt.Fprintf(a.stdout, "segment %s of %s: already %s\n", id, partitionLabel(tp), state)
			} else {
				fmt.Fprintf(a.stdout, "segment %s of %s: %s -> %s\n", id, partitionLabel(tp), from, state)
			}
			return nil
		},
	}
	cmd.Flags().Int32Var(&brokerID, "broker-id", operatorBrokerID, "broker id recorded as the writer")
	cmd.Flags().Int64Var(&eventTimeMs, "event-time-ms", 0, "event time recorded, in ms since the epoch (default now)")
	return cmd
}

// repairError is the exit of a repair function's refusal: the function's
// message, after what was refused; exit 3 when what it names does not
// exist (or is forgotten), 1 otherwise.
func repairError(what string, err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	switch pgErr.Code {
	case pgerrcode.NoDataFound:
		return notFoundErrorf("%s", pgErr.Message)
	case pgerrcode.CheckViolation:
		return fmt.Errorf("invalid %s: %s", what, pgErr.Message)
	}
	return err
}

func (a *app) partitionsSetDeleteStateCommand() *cobra.Command {
	var pf partitionFlags
	var brokerID int32
	var eventTimeMs int64
	cmd := &cobra.Command{
		Use:   "set-delete-state --topic-id ID --partition N STATE",
		Short: "Move a partition's delete state through the repair function: the legal manual repair",
		Long: `Record a partition-delete state as a broker would, through the database's
repair function rlmm_set_partition_delete_state (docs/DBA.md): the
transition is checked against the partition-delete state machine (none ->
DELETE_PARTITION_MARKED -> DELETE_PARTITION_STARTED ->
DELETE_PARTITION_FINISHED, or the current state again, which changes
nothing), and on success the partition's delete_version and the brokers'
caches follow. At DELETE_PARTITION_FINISHED every segment of the partition is
forgotten.

STATE is DELETE_PARTITION_MARKED, DELETE_PARTITION_STARTED or
DELETE_PARTITION_FINISHED (also as 0, 1, 2, or as MARKED, STARTED,
FINISHED).

Exit status: 0 when the partition is in STATE; 1 when the state machine
forbids the transition or the write failed; 3 when the store has never
heard of the partition.

` + databaseHelp,
		Example: `  rlmmctl partitions set-delete-state --topic orders --partition 3 DELETE_PARTITION_FINISHED`,
		Args:    exactArgs(1, "a partition delete state"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if err := pf.validate(cmd); err != nil {
				return err
			}
			state, err := parsePartitionDeleteState(args[0])
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("event-time-ms") {
				eventTimeMs = time.Now().UnixMilli()
			}
			op, err := a.openPartition(ctx, &pf)
			if err != nil {
				return err
			}
			defer op.Close()
			pool, tp := op.pool, op.tp
			current, err := queries.PartitionDeleteState(ctx, pool, ctldb.PartitionDeleteStateParams{TopicID: tp.TopicID, Partition: tp.Partition})
			if errors.Is(err, pgx.ErrNoRows) {
				return notFoundErrorf("no partition %s in the store: nothing to repair", partitionLabel(tp))
			}
			if err != nil {
				return fmt.Errorf("read partition %s: %w", partitionLabel(tp), err)
			}
			from, hasFrom := remotestorage.RemotePartitionDeleteState(-1), current != nil
			if hasFrom {
				from = remotestorage.RemotePartitionDeleteState(*current)
			}

			if _, err := pool.Exec(ctx, `SELECT rlmm_set_partition_delete_state($1, $2, $3, $4, $5)`,
				tp.TopicID, tp.Partition, state.String(), brokerID, eventTimeMs); err != nil {
				return repairError("partition delete state transition", err)
			}
			if hasFrom && from == state {
				fmt.Fprintf(a.stdout, "partition %s: already %s\n", partitionLabel(tp), state)
			} else {
				fmt.Fprintf(a.stdout, "partition %s: delete state %s -> %s\n", partitionLabel(tp), from, state)
			}
			return nil
		},
	}
	pf.register(cmd)
	cmd.Flags().Int32Var(&brokerID, "broker-id", operatorBrokerID, "broker id recorded as the writer")
	cmd.Flags().Int64Var(&eventTimeMs, "event-time-ms", 0, "event time recorded, in ms since the epoch (default now)")
	return cmd
}

// parsePartitionDeleteState accepts a state's name (any case, with or
// without the DELETE_PARTITION_ prefix) or its code.
func parsePartitionDeleteState(s string) (remotestorage.RemotePartitionDeleteState, error) {
	norm := strings.ToUpper(strings.TrimSpace(s))
	if code, err := strconv.Atoi(norm); err == nil {
		if st := remotestorage.RemotePartitionDeleteState(code); code >= 0 && code < 128 && st.Valid() {
			return st, nil
		}
	}
	for st := remotestorage.DeletePartitionMarked; st.Valid(); st++ {
		name := st.String()
		if norm == name || norm == strings.TrimPrefix(name, "DELETE_PARTITION_") {
			return st, nil
		}
	}
	return 0, usageErrorf("state %q: want DELETE_PARTITION_MARKED, DELETE_PARTITION_STARTED or DELETE_PARTITION_FINISHED", s)
}
