package remotestorage

// This file is the single source of truth for both state machines. The SQL
// manager never restates them: it passes AllowedSegmentFromStates (and its
// partition-delete twin) as the $allowed parameter of its conditional UPDATEs.
// The database's repair functions read a copy (rlmm_segment_transitions and
// rlmm_partition_delete_transitions); migrations/guard_test.go fails when it
// drifts.

// segmentTransitions lists, for each from-state, the states it may move to.
// A self-transition is an idempotent retry. Nothing moves to
// CopySegmentStarted: that state is only ever reached by an add.
var segmentTransitions = map[RemoteLogSegmentState][]RemoteLogSegmentState{
	CopySegmentStarted:    {CopySegmentFinished, DeleteSegmentStarted},
	CopySegmentFinished:   {CopySegmentFinished, DeleteSegmentStarted},
	DeleteSegmentStarted:  {DeleteSegmentStarted, DeleteSegmentFinished},
	DeleteSegmentFinished: {DeleteSegmentFinished},
}

// partitionDeleteTransitions lists, for each from-state, the states a
// partition-delete record may move to: none → MARKED → STARTED → FINISHED,
// plus self-transitions.
var partitionDeleteTransitions = map[RemotePartitionDeleteState][]RemotePartitionDeleteState{
	partitionDeleteNone:     {DeletePartitionMarked},
	DeletePartitionMarked:   {DeletePartitionMarked, DeletePartitionStarted},
	DeletePartitionStarted:  {DeletePartitionStarted, DeletePartitionFinished},
	DeletePartitionFinished: {DeletePartitionFinished},
}

// SegmentTransitionAllowed reports whether a segment in state from may move
// to state to.
func SegmentTransitionAllowed(from, to RemoteLogSegmentState) bool {
	for _, s := range segmentTransitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// AllowedSegmentFromStates returns the states from which a segment may reach
// to, in increasing order; empty when no state may (CopySegmentStarted, or a
// value that is not a state).
func AllowedSegmentFromStates(to RemoteLogSegmentState) []RemoteLogSegmentState {
	var from []RemoteLogSegmentState
	for s := CopySegmentStarted; s <= DeleteSegmentFinished; s++ {
		if SegmentTransitionAllowed(s, to) {
			from = append(from, s)
		}
	}
	return from
}

// PartitionDeleteTransitionAllowed reports whether a partition-delete record
// in state from may move to state to. hasFrom is false for a partition with no
// delete record yet.
func PartitionDeleteTransitionAllowed(from RemotePartitionDeleteState, hasFrom bool, to RemotePartitionDeleteState) bool {
	if !hasFrom {
		from = partitionDeleteNone
	}
	return partitionDeleteTransitionAllowed(from, to)
}

func partitionDeleteTransitionAllowed(from, to RemotePartitionDeleteState) bool {
	for _, s := range partitionDeleteTransitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// allowedPartitionDeleteFromStates returns the stored states from which a
// partition-delete record may reach to, and whether a partition with no
// record may reach it too.
func allowedPartitionDeleteFromStates(to RemotePartitionDeleteState) (from []RemotePartitionDeleteState, fromNone bool) {
	for s := DeletePartitionMarked; s <= DeletePartitionFinished; s++ {
		if partitionDeleteTransitionAllowed(s, to) {
			from = append(from, s)
		}
	}
	return from, partitionDeleteTransitionAllowed(partitionDeleteNone, to)
}

// stateCodes are the codes of states, as the statements take them.
func stateCodes[S ~int8](states []S) []int16 {
	codes := make([]int16, len(states))
	for i, s := range states {
		codes[i] = int16(s)
	}
	return codes
}
