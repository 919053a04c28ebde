//go:build !linux

package main

import "errors"

// releaseBinaryPages needs Linux's MADV_PAGEOUT.
func releaseBinaryPages() (int64, error) {
	return 0, errors.New("--release-binary-pages: supported on Linux only")
}

func residentFileBytes() int64 { return -1 }
