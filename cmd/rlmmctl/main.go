// Command rlmmctl is the operator's tool for the remote log metadata that
// Kafka brokers keep in PostgreSQL through package remotestorage: it
// migrates the schema, inspects segments and partitions, answers the
// brokers' lookups by hand, purges forgotten rows and runs a demo.
//
// It lives in package main of the library's module, and only here: cobra
// stays out of the library's import graph.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// Exit statuses. "Not found" has its own code so that scripts can tell a
// lookup that missed from a lookup that failed.
const (
	exitOK       = 0
	exitFailure  = 1 // the command failed: database unreachable, SQL error, …
	exitUsage    = 2 // bad flags or arguments
	exitNotFound = 3 // the thing asked for does not exist (lookup miss, unknown segment, …)
)

const exitStatusHelp = `Exit status:
  0  success
  1  failure (database unreachable, schema not migrated, SQL error, …)
  2  usage error (unknown command or flag, missing or malformed flag)
  3  not found: a lookup that missed, an unknown segment id, an epoch
     without finished segments (the answer is still printed on stdout)`

const databaseHelp = `The database is, in this order: --database-url; else DATABASE_URL; else
the libpq environment variables PGHOST, PGPORT, PGUSER, PGPASSWORD,
PGDATABASE, PGSSLMODE, … (and ~/.pgpass). Passwords are never printed:
DSNs are shown with the password replaced by "xxxxx".`

// exitError carries an exit status; quiet means the message was already
// printed (on stdout, as the command's answer) and stderr stays silent.
type exitError struct {
	code  int
	err   error
	quiet bool
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

func notFoundErrorf(format string, args ...any) error {
	return &exitError{code: exitNotFound, err: fmt.Errorf(format, args...)}
}

// errAnsweredNotFound ends a command whose "not found" answer is already on
// stdout.
var errAnsweredNotFound = &exitError{code: exitNotFound, err: errors.New("not found"), quiet: true}

// app is the state shared by the commands of one invocation.
type app struct {
	databaseURL string
	stdout      io.Writer
	stderr      io.Writer
	scrub       *scrubber
	// stdoutIsTerminal turns on progress lines.
	stdoutIsTerminal bool
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the exit, writing to the given streams.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	scrub := newScrubber()
	// Learn a --database-url password before cobra parses anything, so that
	// even an error about the flags themselves cannot echo it.
	for i, arg := range args {
		if v, ok := strings.CutPrefix(arg, "--database-url="); ok {
			scrub.addDSN(v)
		} else if arg == "--database-url" && i+1 < len(args) {
			scrub.addDSN(args[i+1])
		}
	}
	a := &app{stdout: scrub.writer(stdout), stderr: scrub.writer(stderr), scrub: scrub}
	if f, ok := stdout.(*os.File); ok {
		a.stdoutIsTerminal = term.IsTerminal(int(f.Fd()))
	}
	root := a.rootCommand()
	root.SetArgs(dashPositionals(root, args)) // topic ids that start with '-'
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)

	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	code := exitFailure
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		code = ee.code
		if ee.quiet {
			return code
		}
	case isCobraUsageError(err):
		code = exitUsage
	}
	fmt.Fprintf(a.stderr, "rlmmctl: %s\n", err)
	if code == exitUsage && cmd != nil {
		fmt.Fprintf(a.stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	if ctx.Err() != nil {
		fmt.Fprintln(a.stderr, "rlmmctl: interrupted")
	}
	return code
}

// isCobraUsageError recognises the usage errors that cobra returns as plain
// errors (it has no types for them); flag parse errors come through
// SetFlagErrorFunc as exitErrors already.
func isCobraUsageError(err error) bool {
	msg := err.Error()
	for _, prefix := range []string{"unknown command", "required flag", "unknown flag", "unknown shorthand flag", "accepts ", "requires at least", "invalid argument"} {
		if strings.HasPrefix(msg, prefix) {
			return true
		}
	}
	return false
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "rlmmctl",
		Short: "Operate the remote log metadata of Kafka tiered storage kept in PostgreSQL",
		Long: `rlmmctl operates the remote log metadata (KIP-405) that Kafka brokers keep
in PostgreSQL through the remotestorage library: it migrates the schema,
lists and looks up segments as the brokers see them, summarises partitions,
purges forgotten rows, and runs a demo of the whole lifecycle.

Topic ids are accepted as canonical UUIDs or in Kafka's base64 form (as
kafka-topics --describe prints them, e.g. b9Yw3cT7RIWqrVNH8pz5Ug).

` + databaseHelp + `

` + exitStatusHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
		// A bare "rlmmctl" prints help; "rlmmctl nonsense" is a usage error.
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unknown command %q for %q", args[0], cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
		PersistentPreRun: func(cmd *cobra.Command, args []string) {
			a.scrub.addDSN(a.databaseURL)
		},
	}
	root.PersistentFlags().StringVar(&a.databaseURL, "database-url", "",
		"PostgreSQL URL or keyword/value DSN (default: DATABASE_URL, else the PG* variables)")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return &exitError{code: exitUsage, err: err}
	})
	root.CompletionOptions.HiddenDefaultCmd = true

	root.AddCommand(
		a.migrateCommand(),
		a.segmentsCommand(),
		a.lookupCommand(),
		a.highestOffsetCommand(),
		a.partitionsCommand(),
		a.purgeCommand(),
		a.demoCommand(),
		a.rolesCommand(),
		a.stuckCommand(),
	)
	a.addRepairCommands(root) // segments set-state, partitions set-delete-state
	return root
}

// groupCommand is a command that only holds subcommands: without one, or
// with an unknown one, it is a usage error rather than cobra's silent help.
func groupCommand(use, short, long string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unknown command %q for %q", args[0], cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return usageErrorf("%s needs a subcommand", cmd.CommandPath())
		},
	}
}

// exactArgs is cobra.ExactArgs with a usage exit status.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageErrorf("%s takes %s (got %d arguments)", cmd.CommandPath(), what, len(args))
		}
		return nil
	}
}

// noArgs rejects positional arguments with a usage exit status.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErrorf("%s takes no arguments (got %q)", cmd.CommandPath(), args[0])
	}
	return nil
}
