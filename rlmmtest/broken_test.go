package rlmmtest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/rlmmtest"
)

// The suite must be able to fail. TestBrokenManagersFailTheSuite runs parts of
// it, in a child process of this test binary, against InMemoryManager wrapped
// with one deliberate bug, and checks that exactly the subtests about that bug
// fail. The child process keeps the expected failures out of this run's result.

const brokenEnv = "RLMMTEST_BROKEN"

// brokenManagers are the deliberately wrong managers, by name.
var brokenManagers = map[string]func(m rlmmtest.Manager) rlmmtest.Manager{
	// Accepts DELETE_SEGMENT_STARTED -> COPY_SEGMENT_FINISHED: it reports
	// success and lists the segment as COPY_SEGMENT_FINISHED again.
	"delete-started-to-copy-finished": func(m rlmmtest.Manager) rlmmtest.Manager {
		return &resurrecting{Manager: m, resurrected: map[uuid.UUID]bool{}}
	},
	// Where finished segments overlap, the lookup returns the one whose range
	// of the epoch starts earliest (the shadowed one).
	"shadowed-lookup": func(m rlmmtest.Manager) rlmmtest.Manager { return shadowedLookup{m} },
	// EpochEndOffset answers HighestOffsetForEpoch (max EndOffset) instead.
	"epoch-end-is-max-end-offset": func(m rlmmtest.Manager) rlmmtest.Manager { return epochEndIsHighest{m} },
	// FirstSegmentForTimestamp ignores ties: among the matching segments
	// that start at the same offset it returns the last added.
	"timestamp-ignores-ties": func(m rlmmtest.Manager) rlmmtest.Manager { return timestampIgnoresTies{m} },
}

// TestBrokenSuite is the child: it runs the suite against the broken manager
// named by RLMMTEST_BROKEN, and does nothing otherwise (it is not a test of
// its own, only the child process's entry point).
func TestBrokenSuite(t *testing.T) {
	name := os.Getenv(brokenEnv)
	if name == "" {
		return // run by TestBrokenManagersFailTheSuite
	}
	wrap := brokenManagers[name]
	require.NotNil(t, wrap, "unknown %s=%s", brokenEnv, name)
	rlmmtest.Run(t, func(t *testing.T, opts ...rs.Option) rlmmtest.Manager {
		return wrap(rs.NewInMemoryManager(opts...))
	})
}

func TestBrokenManagersFailTheSuite(t *testing.T) {
	if os.Getenv(brokenEnv) != "" {
		return // this is the child
	}
	cases := []struct {
		broken string
		groups []string // the suite groups the child runs
		// wantFailed is exactly the set of failing leaf subtests (group/name).
		wantFailed []string
	}{
		{
			broken: "delete-started-to-copy-finished",
			groups: []string{"SegmentTransitions", "Randomized"},
			wantFailed: []string{
				"Randomized/model_based",
				"SegmentTransitions/DELETE_SEGMENT_STARTED_to_COPY_SEGMENT_FINISHED",
			},
		},
		{
			broken: "shadowed-lookup",
			groups: []string{"Lookup", "Overlaps", "Randomized"},
			wantFailed: []string{
				"Overlaps/10-100_then_5-50",
				"Overlaps/four_overlapping",
				"Overlaps/latest_epoch_range_start_wins_not_latest_segment_start",
				"Overlaps/shadowing_segment_not_finished",
				"Randomized/model_based",
			},
		},
		{
			broken: "epoch-end-is-max-end-offset",
			groups: []string{"EpochEndOffset", "Randomized"},
			wantFailed: []string{
				"EpochEndOffset/deletes_never_lower_it",
				"EpochEndOffset/max_over_finished_segments",
				"EpochEndOffset/unclean_election",
				"Randomized/model_based",
			},
		},
		{
			broken: "timestamp-ignores-ties",
			groups: []string{"FirstSegmentForTimestamp", "Randomized"},
			wantFailed: []string{
				"FirstSegmentForTimestamp/ties_go_to_the_first_added",
				"Randomized/model_based",
			},
		},
	}
	for _, c := range cases {
		t.Run(c.broken, func(t *testing.T) {
			t.Parallel()
			passed, failed := runChild(t, c.broken, c.groups)
			require.Equal(t, c.wantFailed, failed, "failing subtests")
			require.NotEmpty(t, passed, "the other subtests of those groups pass")
		})
	}
}

var resultLine = regexp.MustCompile(`(?m)^\s*--- (PASS|FAIL): TestBrokenSuite/([^/\s]+/[^\s]+) `)

// runChild runs the given groups of TestBrokenSuite against a broken manager
// in a child process, with a fixed seed, and returns its passing and failing
// leaf subtests (group/name, sorted).
func runChild(t *testing.T, broken string, groups []string) (passed, failed []string) {
	t.Helper()
	pattern := "^TestBrokenSuite$/^(" + strings.Join(groups, "|") + ")$"
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run="+pattern, "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), brokenEnv+"="+broken, "RLMMTEST_SEED=1", "RLMMTEST_STEPS=1500")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the child run must fail; output:\n%s", out)
	require.Equal(t, 1, exit.ExitCode(), "the child fails its tests (exit 1), it does not crash; output:\n%s", out)
	for _, m := range resultLine.FindAllStringSubmatch(string(out), -1) {
		if m[1] == "PASS" {
			passed = append(passed, m[2])
		} else {
			failed = append(failed, m[2])
		}
	}
	slices.Sort(passed)
	slices.Sort(failed)
	if t.Failed() || len(failed) == 0 {
		t.Logf("child output:\n%s", out)
	}
	return passed, failed
}

// resurrecting accepts DELETE_SEGMENT_STARTED -> COPY_SEGMENT_FINISHED.
type resurrecting struct {
	rlmmtest.Manager
	mu          sync.Mutex
	resurrected map[uuid.UUID]bool
}

func (b *resurrecting) UpdateRemoteLogSegmentMetadata(ctx context.Context, u rs.RemoteLogSegmentMetadataUpdate) error {
	err := b.Manager.UpdateRemoteLogSegmentMetadata(ctx, u)
	b.mu.Lock()
	defer b.mu.Unlock()
	if err == nil {
		delete(b.resurrected, u.SegmentID.ID)
		return nil
	}
	if u.State != rs.CopySegmentFinished || !errors.Is(err, rs.ErrInvalidSegmentTransition) {
		return err
	}
	list, lerr := b.Manager.ListRemoteLogSegments(ctx, u.SegmentID.TopicIDPartition)
	if lerr != nil {
		return err
	}
	for _, s := range list {
		if s.SegmentID.ID == u.SegmentID.ID && s.State == rs.DeleteSegmentStarted {
			b.resurrected[s.SegmentID.ID] = true
			return nil
		}
	}
	return err
}

func (b *resurrecting) fake(list []rs.RemoteLogSegmentMetadata) []rs.RemoteLogSegmentMetadata {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range list {
		if b.resurrected[list[i].SegmentID.ID] {
			list[i].State = rs.CopySegmentFinished
		}
	}
	return list
}

func (b *resurrecting) ListRemoteLogSegments(ctx context.Context, tp rs.TopicIDPartition) ([]rs.RemoteLogSegmentMetadata, error) {
	list, err := b.Manager.ListRemoteLogSegments(ctx, tp)
	return b.fake(list), err
}

func (b *resurrecting) ListRemoteLogSegmentsByEpoch(ctx context.Context, tp rs.TopicIDPartition, e rs.LeaderEpoch) ([]rs.RemoteLogSegmentMetadata, error) {
	list, err := b.Manager.ListRemoteLogSegmentsByEpoch(ctx, tp, e)
	return b.fake(list), err
}

// shadowedLookup answers a lookup with the finished segment whose range of
// the epoch starts earliest, not latest.
type shadowedLookup struct{ rlmmtest.Manager }

func rangeOf(s rs.RemoteLogSegmentMetadata, e rs.LeaderEpoch) (first, last int64, ok bool) {
	first, ok = s.SegmentLeaderEpochs[e]
	last = s.EndOffset
	for e2, start := range s.SegmentLeaderEpochs {
		if e2 > e && start-1 < last {
			last = start - 1
		}
	}
	return first, last, ok
}

func (b shadowedLookup) RemoteLogSegmentMetadata(ctx context.Context, tp rs.TopicIDPartition, e rs.LeaderEpoch, o int64) (rs.RemoteLogSegmentMetadata, bool, error) {
	got, ok, err := b.Manager.RemoteLogSegmentMetadata(ctx, tp, e, o)
	if err != nil || !ok {
		return got, ok, err
	}
	list, err := b.Manager.ListRemoteLogSegmentsByEpoch(ctx, tp, e)
	if err != nil {
		return got, ok, nil
	}
	best, _, _ := rangeOf(got, e)
	for _, s := range list {
		first, last, carries := rangeOf(s, e)
		if carries && s.State == rs.CopySegmentFinished && first <= o && o <= last && first < best {
			got, best = s, first
		}
	}
	return got, true, nil
}

// epochEndIsHighest answers EpochEndOffset with HighestOffsetForEpoch.
type epochEndIsHighest struct{ rlmmtest.Manager }

func (b epochEndIsHighest) EpochEndOffset(ctx context.Context, tp rs.TopicIDPartition, e rs.LeaderEpoch) (int64, bool, error) {
	return b.Manager.HighestOffsetForEpoch(ctx, tp, e)
}

// timestampIgnoresTies returns, among the matching segments that start where
// the right answer starts, the last one added.
type timestampIgnoresTies struct{ rlmmtest.Manager }

func (b timestampIgnoresTies) FirstSegmentForTimestamp(ctx context.Context, tp rs.TopicIDPartition, e rs.LeaderEpoch, ts, startingOffset int64) (rs.RemoteLogSegmentMetadata, bool, error) {
	got, ok, err := b.Manager.FirstSegmentForTimestamp(ctx, tp, e, ts, startingOffset)
	if err != nil || !ok {
		return got, ok, err
	}
	list, err := b.Manager.ListRemoteLogSegmentsByEpoch(ctx, tp, e)
	if err != nil {
		return got, ok, nil
	}
	for _, s := range list {
		if s.StartOffset == got.StartOffset && s.State == rs.CopySegmentFinished && s.MaxTimestampMs >= ts && s.EndOffset >= startingOffset {
			got = s
		}
	}
	return got, true, nil
}
