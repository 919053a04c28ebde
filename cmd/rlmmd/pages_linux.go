package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// releaseBinaryPages advises MADV_PAGEOUT over each mapping of the running
// binary's file (/proc/self/maps), and returns how many bytes they span.
// It writes the file's dirty pages first. The kernel drops the pages that
// no other process maps: another
// rlmmd running the same file keeps its pages. Private pages this process
// wrote (its data) are anonymous and stay.
func releaseBinaryPages() (int64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	// POSIX_FADV_DONTNEED first drains every CPU's batch of pages not yet
	// on the kernel's LRU lists, which MADV_PAGEOUT cannot take (it drains
	// its own CPU's only): the pages faulted in last, by threads on other
	// CPUs, would stay. It also drops the file's cached pages no process maps.
	bin, err := os.Open(exe)
	if err != nil {
		return 0, err
	}
	defer func() { _ = bin.Close() }()
	// A binary written just before it ran (the plugin unpacks it so) may
	// still have dirty pages, which neither advice drops: write them first.
	if err := unix.Fdatasync(int(bin.Fd())); err != nil {
		return 0, fmt.Errorf("fdatasync of %s: %w", exe, err)
	}
	if err := unix.Fadvise(int(bin.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return 0, fmt.Errorf("fadvise(POSIX_FADV_DONTNEED) of %s: %w", exe, err)
	}
	var spans int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// address perms offset dev inode path
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[5] != exe {
			continue
		}
		lo, hi, _ := strings.Cut(fields[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			return spans, fmt.Errorf("/proc/self/maps: a line reads %q", sc.Text())
		}
		for _, advice := range []uintptr{unix.MADV_RANDOM, unix.MADV_PAGEOUT} {
			if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), advice); errno != 0 {
				return spans, fmt.Errorf("madvise(%d) over %s: %w", advice, fields[0], errno)
			}
		}
		spans += int64(end - start)
	}
	if err := sc.Err(); err != nil {
		return spans, err
	}
	if err := unix.Fadvise(int(bin.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return 0, fmt.Errorf("fadvise(POSIX_FADV_DONTNEED) of %s: %w", exe, err)
	}
	if spans == 0 {
		return 0, fmt.Errorf("/proc/self/maps maps nothing of %s", exe)
	}
	return spans, nil
}

// residentFileBytes is the process's RssFile (/proc/self/status), -1 when
// it cannot be read.
func residentFileBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return -1
			}
			return kb << 10
		}
	}
	return -1
}
