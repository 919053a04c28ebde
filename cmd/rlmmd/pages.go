package main

// pages.go: --release-binary-pages. Most of the binary's code and read-only
// data is touched only while rlmmd starts (flags, TLS, the migrations,
// protobuf's registries) or while a partition loads, and then stays
// resident: clean pages of the file, which the kernel drops only under
// pressure, and which a process's RSS and its cgroup's memory count until
// it does. An embedded rlmmd holds few segments beside them, so they were
// most of its RSS. After the start, and after each change of the
// partitions once their loads end, rlmmd asks the kernel to drop the pages
// of its binary that it alone maps; the calls it serves fault back the few
// MB they run (docs/BENCHMARKS.md, "The embedded mode, the cache packed").

import (
	"context"
	"errors"
	"log/slog"
	"time"

	rs "github.com/krabka/remotestorage"
)

// Bounds of the wait for the loads before a release: how often a partition
// still loading is asked again, and how long a change's loads are waited
// for at most (the pages are released then anyway).
const (
	releasePoll    = 100 * time.Millisecond
	releaseMaxWait = 2 * time.Minute
)

// pageReleaser releases the binary's pages after the start and after the
// loads of each change of the partitions.
type pageReleaser struct {
	log     *slog.Logger
	caught  func(ctx context.Context, tp rs.TopicIDPartition) (bool, error)
	changes chan []rs.TopicIDPartition // capacity 1: the newest change not yet waited for
	release func() (int64, error)      // releaseBinaryPages, or a test's
}

func newPageReleaser(log *slog.Logger, caught func(context.Context, rs.TopicIDPartition) (bool, error)) *pageReleaser {
	return &pageReleaser{log: log, caught: caught, changes: make(chan []rs.TopicIDPartition, 1), release: releaseBinaryPages}
}

// changed tells the releaser that tps were assigned. It does not wait: a
// change that comes while another's loads are waited for replaces the one
// queued, whose partitions the wait covers too, as they load alike.
func (r *pageReleaser) changed(tps []rs.TopicIDPartition) {
	if r == nil {
		return
	}
	for {
		select {
		case r.changes <- tps:
			return
		default:
		}
		select {
		case old := <-r.changes:
			tps = append(old, tps...)
		default:
		}
	}
}

// run releases once at once, then after each change's loads, until ctx ends.
func (r *pageReleaser) run(ctx context.Context) {
	r.releaseNow("started")
	for {
		var tps []rs.TopicIDPartition
		select {
		case <-ctx.Done():
			return
		case tps = <-r.changes:
		}
		r.waitLoaded(ctx, tps)
		if ctx.Err() != nil {
			return
		}
		r.releaseNow("partitions loaded")
	}
}

// waitLoaded waits until each partition of tps answers CaughtUp true, fails
// with another error than ErrNotReady (it is not loading), or releaseMaxWait
// passes (as it does for a partition stopped meanwhile, which CaughtUp
// answers false).
func (r *pageReleaser) waitLoaded(ctx context.Context, tps []rs.TopicIDPartition) {
	ctx, cancel := context.WithTimeout(ctx, releaseMaxWait)
	defer cancel()
	for _, tp := range tps {
		for {
			ok, err := r.caught(ctx, tp)
			if ok || (err != nil && !errors.Is(err, rs.ErrNotReady)) {
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(releasePoll):
			}
		}
	}
}

func (r *pageReleaser) releaseNow(after string) {
	before := residentFileBytes()
	n, err := r.release()
	if err != nil {
		r.log.Warn("rlmmd: cannot release the binary's pages", "after", after, "err", err)
		return
	}
	r.log.Info("rlmmd: released the binary's pages", "after", after, "mapped", n, "resident_file_before", before, "resident_file_after", residentFileBytes())
}
