package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// TestEveryCommandHasHelp walks the command tree: every command answers
// --help with its usage and exit status 0.
func TestEveryCommandHasHelp(t *testing.T) {
	t.Parallel()
	var walk func(c *cobra.Command)
	var paths [][]string
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" {
			return
		}
		paths = append(paths, strings.Fields(c.CommandPath())[1:])
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk((&app{scrub: newScrubber()}).rootCommand())
	require.Greater(t, len(paths), 10)
	for _, path := range paths {
		r := runInProcess(append(path, "--help")...)
		require.Equal(t, exitOK, r.code, "%v: %s", path, r.output())
		require.Contains(t, r.stdout, "Usage:", path)
		require.Contains(t, r.stdout, "--database-url", path)
		require.Empty(t, r.stderr, path)
	}
	root := runInProcess("--help")
	require.Contains(t, root.stdout, "Exit status:")
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"nonsense"},
		{"migrate"},
		{"migrate", "sideways"},
		{"migrate", "up", "extra"},
		{"segments", "list", "--partition", "0"},
		{"segments", "list", "--topic-id", "b9Yw3cT7RIWqrVNH8pz5Ug"},
		{"segments", "list", "--topic-id", "b9Yw3cT7RIWqrVNH8pz5Ug", "--topic", "x", "--partition", "0"},
		{"segments", "list", "--topic-id", "b9Yw3cT7RIWqrVNH8pz5Ug", "--partition", "-1"},
		{"segments", "list", "--topic-id", "b9Yw3cT7RIWqrVNH8pz5Ug", "--partition", "zero"},
		{"segments", "list", "--topic-id", "b9Yw3cT7RIWqrVNH8pz5Ug", "--partition", "0", "-o", "yaml"},
		{"segments", "get"},
		{"lookup", "--topic-id", "b9Yw3cT7RIWqrVNH8pz5Ug", "--partition", "0", "--offset", "1"},
		{"highest-offset", "--topic-id", "b9Yw3cT7RIWqrVNH8pz5Ug", "--partition", "0", "--epoch", "-1"},
		{"purge", "--batch-size", "0"},
		{"demo", "--segments", "2"},
		{"demo", "--topics", "1"},
		{"--no-such-flag"},
	} {
		r := runInProcess(args...)
		require.Equal(t, exitUsage, r.code, "%v: %s", args, r.output())
		require.True(t, strings.HasPrefix(r.stderr, "rlmmctl: "), "%v: %s", args, r.stderr)
		require.Contains(t, r.stderr, "--help", args)
		require.Empty(t, r.stdout, args)
	}
	// A bare rlmmctl shows help.
	r := runInProcess()
	require.Equal(t, exitOK, r.code)
	require.Contains(t, r.stdout, "Available Commands:")
}
