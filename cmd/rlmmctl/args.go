package main

// args.go: positional arguments that start with '-'. A topic id in Kafka's
// base64 form starts with '-' one time in 64 (kafka-topics prints
// "-nOREBwYTdWzGvLvCWMbuw"), and a topic name may start with one too; pflag
// takes either for a cluster of shorthand flags ("unknown shorthand flag:
// 'n'"). Operators paste ids as printed, so the commands that take a topic
// as an argument accept them as they are.

import (
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// dashArgsAnnotation marks a command whose positional arguments may start
// with '-' (see dashPositionals).
const dashArgsAnnotation = "rlmmctl/dash-args"

// acceptDashArgs marks cmd's positional arguments as allowed to start with
// '-', and returns cmd.
func acceptDashArgs(cmd *cobra.Command) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[dashArgsAnnotation] = "true"
	return cmd
}

// dashPositionals rewrites args for the command they name when that command
// accepts positional arguments starting with '-': every positional argument
// goes, in order, after a "--", where cobra takes none for a flag. An
// argument that reads as a topic id in Kafka's base64 form ("-…", "--…")
// is a positional one, and so is one starting with a single '-' whose
// first letter is no shorthand flag of the command. Flags and their values stay as they are
// (pflag already takes "--topic-id -nOREBwYTdWzGvLvCWMbuw" as a value).
// Other commands' args, and args with a "--" of their own, are returned
// unchanged.
func dashPositionals(root *cobra.Command, args []string) []string {
	cmd, _, err := root.Find(args)
	if err != nil || cmd.Annotations[dashArgsAnnotation] == "" {
		return args
	}
	cmd.InitDefaultHelpFlag()
	lookup := func(name string) *pflag.Flag {
		if f := cmd.Flags().Lookup(name); f != nil {
			return f
		}
		return cmd.InheritedFlags().Lookup(name)
	}
	lookupShort := func(c byte) *pflag.Flag {
		if f := cmd.Flags().ShorthandLookup(string(c)); f != nil {
			return f
		}
		return cmd.InheritedFlags().ShorthandLookup(string(c))
	}
	var path []string // the command's names after the root's
	for c := cmd; c != root && c != nil; c = c.Parent() {
		path = append([]string{c.Name()}, path...)
	}

	var head, positionals []string
	dashed := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return args // the caller separated them already
		case strings.HasPrefix(a, "--") && !readsAsKafkaTopicID(a):
			head = append(head, a)
			name, _, hasValue := strings.Cut(a[2:], "=")
			if f := lookup(name); f != nil && !hasValue && f.NoOptDefVal == "" && i+1 < len(args) {
				i++
				head = append(head, args[i])
			}
		case len(a) > 1 && a[0] == '-' && !readsAsKafkaTopicID(a) && lookupShort(a[1]) != nil:
			head = append(head, a)
			if f := lookupShort(a[1]); len(a) == 2 && f.NoOptDefVal == "" && i+1 < len(args) {
				i++
				head = append(head, args[i])
			}
		case len(path) > 0 && len(positionals) == 0 && a == path[0]:
			head = append(head, a)
			path = path[1:]
		default:
			dashed = dashed || (len(a) > 1 && a[0] == '-')
			positionals = append(positionals, a)
		}
	}
	if !dashed {
		return args
	}
	return append(append(head, "--"), positionals...)
}

// readsAsKafkaTopicID reports whether s is a topic id in Kafka's base64 form.
func readsAsKafkaTopicID(s string) bool {
	_, err := parseTopicID(s)
	return err == nil && len(s) == kafkaTopicIDLen
}
