package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	pb "github.com/krabka/remotestorage/proto/remotestorage/v1"
)

// TestReleaseBinaryPages: the advice drops this test binary's resident
// file pages. It runs the release in a new process of the test binary (the
// first release of a process, as rlmmd's at its start, and not after what
// the earlier tests faulted in), from a copy of the binary, whose pages no
// other process maps.
// The copy is written just before it runs, as the plugin unpacks rlmmd, so
// its pages are dirty until the release writes them. Not parallel: parallel
// tests running beside it would fault their code back meanwhile.
func TestReleaseBinaryPages(t *testing.T) {
	if os.Getenv("RLMMD_TEST_RELEASE_CHILD") != "" {
		before := residentFileBytes()
		n, err := releaseBinaryPages()
		after := residentFileBytes()
		fmt.Printf("release: mapped=%d before=%d after=%d err=%v\n", n, before, after, err)
		return
	}
	// A copy: pages this process maps too would be shared, and stay.
	exe, err := os.ReadFile("/proc/self/exe")
	require.NoError(t, err)
	copied := filepath.Join(t.TempDir(), "rlmmd.test")
	require.NoError(t, os.WriteFile(copied, exe, 0o755))
	cmd := exec.Command(copied, "-test.run", "^TestReleaseBinaryPages$", "-test.count", "1")
	cmd.Env = append(os.Environ(), "RLMMD_TEST_RELEASE_CHILD=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	var n, before, after int64
	var releaseErr string
	i := bytes.Index(out, []byte("release: "))
	require.GreaterOrEqual(t, i, 0, "the child's report in %s", out)
	_, err = fmt.Sscanf(string(out[i:]), "release: mapped=%d before=%d after=%d err=%s", &n, &before, &after, &releaseErr)
	require.NoError(t, err, "%s", out)
	require.Equal(t, "<nil>", releaseErr)
	require.GreaterOrEqual(t, n, int64(len(exe))/2, "the mappings span the binary")
	require.Positive(t, before)
	require.Less(t, after, before/2, "RssFile %d kB before the release, %d kB after", before>>10, after>>10)
	t.Logf("RssFile %d kB before the release, %d kB after", before>>10, after>>10)
}

// TestPageReleaserWaitsForLoads: through rlmmd's service, the pages are
// released once at the start, and after a change of the partitions only
// once each of them is loaded: the loads wait on a lock the test holds, so
// a release before they end would see partitions still loading.
func TestPageReleaserWaitsForLoads(t *testing.T) {
	t.Parallel()
	b := startDaemon(t, nil)
	ctx := callCtx(t)
	var tps []*pb.TopicIdPartition
	for p := range 20 {
		tp := newTP()
		tp.Partition = int32(p)
		for i := range int64(20) {
			s := newSegment(tp, i*10, i*10+9, &pb.EpochStart{Epoch: 0, StartOffset: i * 10})
			_, err := b.client.AddSegment(ctx, &pb.AddSegmentRequest{Segment: s})
			require.NoError(t, err)
			finish(t, b.client, s)
		}
		tps = append(tps, tp)
	}
	assigned, err := tpsFrom(tps)
	require.NoError(t, err)

	loadingAtRelease := make(chan int, 10) // per release: how many partitions were not loaded
	r := newPageReleaser(slog.New(slog.DiscardHandler), b.d.manager.CaughtUp)
	r.release = func() (int64, error) {
		loading := 0
		for _, tp := range assigned {
			if ok, _ := b.d.manager.CaughtUp(ctx, tp); !ok {
				loading++
			}
		}
		loadingAtRelease <- loading
		return 1, nil
	}
	b.d.svc.pages = r
	rctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.run(rctx); close(done) }()
	defer func() { cancel(); <-done }()
	next := func(what string) int {
		select {
		case n := <-loadingAtRelease:
			return n
		case <-ctx.Done():
			t.Fatalf("no release %s", what)
			return 0
		}
	}
	require.Equal(t, len(assigned), next("at the start"), "at the start no partition is assigned")

	unlock := holdLock(t, b.dsn, "LOCK TABLE rlmm_segments IN ACCESS EXCLUSIVE MODE")
	defer unlock()
	_, err = b.client.OnPartitionLeadershipChanges(ctx, &pb.OnPartitionLeadershipChangesRequest{Leaders: tps[:10], Followers: tps[10:]})
	require.NoError(t, err)
	waitForLockWait(t, b.dsn) // the loads wait
	unlock()
	require.Equal(t, 0, next("after the loads"), "partitions still loading at the release after the change")
	select {
	case n := <-loadingAtRelease:
		t.Fatalf("a second release after one change (%d loading)", n)
	default:
	}
}
