package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// mainEnv makes the test binary run main() instead of the tests, so a test
// can see the exit status the real command has.
const mainEnv = "CURATOR_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runMain runs the command line in a child process as the real binary
// would, and returns its exit status and stderr.
func runMain(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), mainEnv+"=1", "CURATOR_CONFIG="+t.TempDir()+"/none.yaml")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), stderr.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, stderr.String()
}

// commandTree is every command under root, root first.
func commandTree(root *cobra.Command) []*cobra.Command {
	all := []*cobra.Command{root}
	for _, c := range root.Commands() {
		all = append(all, commandTree(c)...)
	}
	return all
}

// args is the command line that reaches c (without the binary's name).
func argsTo(c *cobra.Command) []string {
	return strings.Fields(c.CommandPath())[1:]
}

// Every command with subcommands refuses an unknown one, and a near miss
// gets a "did you mean"; every command refuses an unknown flag, and a near
// miss gets the flag it meant. Nothing reaches a cluster: there is none.
func TestCommandTreeRefusesUnknown(t *testing.T) {
	for _, c := range commandTree(newRootCommand()) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" && c.Parent() != nil {
			continue
		}
		path := argsTo(c)
		if c.HasSubCommands() {
			child := c.Commands()[0].Name()
			_, err := runCLI(t, append(path, "bogus")...)
			if err == nil || !strings.Contains(err.Error(), `unknown command "bogus"`) {
				t.Errorf("%s bogus: error = %v, want an unknown command", c.CommandPath(), err)
			}
			_, err = runCLI(t, append(path, child+"x")...)
			if err == nil || !strings.Contains(err.Error(), "did you mean") {
				t.Errorf("%s %sx: error = %v, want a did you mean", c.CommandPath(), child, err)
			}
		}
		_, err := runCLI(t, append(path, "--no-such-flag-at-all")...)
		if err == nil || !strings.Contains(err.Error(), "unknown flag: --no-such-flag-at-all") {
			t.Errorf("%s --no-such-flag-at-all: error = %v, want an unknown flag", c.CommandPath(), err)
		}
		var name string
		c.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
			if name == "" && f.Name != "help" {
				name = f.Name
			}
		})
		if name != "" {
			_, err := runCLI(t, append(path, "--"+name+"x")...)
			if err == nil || !strings.Contains(err.Error(), "did you mean --"+name+"?") {
				t.Errorf("%s --%sx: error = %v, want did you mean --%s", c.CommandPath(), name, err, name)
			}
		}
	}
}

// The real binary exits non-zero on an unknown command or flag anywhere in
// the tree, and 0 for a command that only groups others run alone.
func TestUnknownCommandExitStatus(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"group", "lss"}, 1, `did you mean "ls"?`},
		{[]string{"group", "scaal", "workers", "3"}, 1, `did you mean "scale"?`},
		{[]string{"rollout", "frob"}, 1, `unknown command "frob" for "curator rollout" (it has`},
		{[]string{"agent", "bogus"}, 1, `unknown command "bogus" for "curator agent"`},
		{[]string{"node", "bogus"}, 1, `unknown command "bogus" for "curator node"`},
		{[]string{"bogus"}, 1, `unknown command "bogus" for "curator"`},
		{[]string{"agent", "run", "--data-dri", "x"}, 1, "unknown flag: --data-dri (did you mean --data-dir?)"},
		{[]string{"group", "bogus", "--help"}, 1, `unknown command "bogus" for "curator group"`},
		{[]string{"node", "lss", "-h"}, 1, `did you mean "ls"?`},
		{[]string{"group", "--help"}, 0, ""},
		{[]string{"group", "ls", "--help"}, 0, ""},
		{[]string{"group"}, 0, ""},
		{[]string{"rollout"}, 0, ""},
	} {
		code, stderr := runMain(t, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("curator %s: exit %d, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), code, stderr, tc.code, tc.want)
		}
	}
}

// A backtick in a flag's usage makes cobra take the quoted word as the
// flag's value name (--provider make image): none may have one.
func TestNoBacktickInFlagUsage(t *testing.T) {
	for _, c := range commandTree(newRootCommand()) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if strings.Contains(f.Usage, "`") {
				t.Errorf("%s --%s: usage has a backtick: %q", c.CommandPath(), f.Name, f.Usage)
			}
		})
	}
}
