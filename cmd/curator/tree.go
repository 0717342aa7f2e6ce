package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// strictTree makes the whole command tree refuse what it does not know:
//   - a command with subcommands, run with an unknown one, fails with a
//     "did you mean" (cobra would print the help and exit 0, which hides a
//     typo from a script); run alone it prints its help;
//   - an unknown flag fails with the nearest flag the command has.
//
// It is applied once to the root, so a command added later cannot forget it.
func strictTree(root *cobra.Command) {
	root.SetFlagErrorFunc(flagError)
	// cobra answers --help before it checks the arguments: an unknown
	// subcommand with --help prints no help here, and execute fails.
	help := root.HelpFunc()
	root.SetHelpFunc(func(cmd *cobra.Command, args []string) {
		if unknownWithHelp(cmd) != nil {
			return
		}
		help(cmd, args)
	})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.HasSubCommands() {
			c.SuggestionsMinimumDistance = 2
			if c.Args == nil {
				c.Args = unknownSubcommand
			}
			if c.Run == nil && c.RunE == nil {
				c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
			}
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
}

// execute runs the command line of root. A command that groups others, run
// with an unknown subcommand and --help, fails as it does without --help
// (cobra would print the help and exit 0, which hides the typo).
func execute(ctx context.Context, root *cobra.Command) error {
	cmd, err := root.ExecuteContextC(ctx)
	if err != nil {
		return err
	}
	return unknownWithHelp(cmd)
}

// unknownWithHelp is the refusal of an unknown subcommand of cmd when it
// was asked for its help (nil when it was not, or when there is none).
func unknownWithHelp(cmd *cobra.Command) error {
	if !cmd.HasSubCommands() {
		return nil
	}
	if asked, _ := cmd.Flags().GetBool("help"); !asked {
		return nil
	}
	return unknownSubcommand(cmd, cmd.Flags().Args())
}

// unknownSubcommand is the Args of a command that only groups others.
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		return errors.New(msg + fmt.Sprintf(" (did you mean %q?)", s[0]))
	}
	var names []string
	for _, s := range cmd.Commands() {
		if s.IsAvailableCommand() {
			names = append(names, s.Name())
		}
	}
	return errors.New(msg + " (it has " + strings.Join(names, ", ") + ")")
}

// flagError adds the nearest known flag to pflag's "unknown flag: --x".
func flagError(cmd *cobra.Command, err error) error {
	const prefix = "unknown flag: --"
	msg := err.Error()
	if !strings.HasPrefix(msg, prefix) {
		return err
	}
	if s := nearestFlag(cmd, strings.TrimPrefix(msg, prefix)); s != "" {
		return fmt.Errorf("%w (did you mean --%s?)", err, s)
	}
	return err
}

// nearestFlag is the flag of cmd closest to name by edit distance (at most 2,
// or name a prefix of it), "" if none is.
func nearestFlag(cmd *cobra.Command, name string) string {
	var names []string
	seen := func(f *pflag.Flag) { names = append(names, f.Name) }
	cmd.Flags().VisitAll(seen)
	cmd.InheritedFlags().VisitAll(seen)
	sort.Strings(names)
	best, bestD := "", 3
	for _, n := range names {
		d := editDistance(name, n)
		if strings.HasPrefix(n, name) || strings.HasPrefix(name, n) {
			d = min(d, 1)
		}
		if d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
