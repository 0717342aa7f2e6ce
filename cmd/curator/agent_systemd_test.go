package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/curatorproject/curator/deploy/systemd"
	"golang.org/x/sys/unix"
)

// The unit in the repository is what install-unit writes by default, so
// the file copy and the command install the same thing.
func TestAgentUnitFile(t *testing.T) {
	want := systemd.AgentUnit
	out, err := runCLI(t, "agent", "install-unit", "--binary", "/usr/local/bin/curator", "--output", "-")
	if err != nil {
		t.Fatal(err)
	}
	if out != want {
		t.Errorf("install-unit writes\n%s\nbut deploy/systemd/curator-agent.service holds\n%s\n(regenerate it: curator agent install-unit --binary /usr/local/bin/curator --output - > deploy/systemd/curator-agent.service)", out, want)
	}
	for _, line := range []string{"Type=notify", "Restart=on-failure", fmt.Sprintf("RestartPreventExitStatus=%d", exitRefused), "ExecStart=/usr/local/bin/curator agent run --data-dir /var/lib/curator\n"} {
		if !strings.Contains(out, line) {
			t.Errorf("the unit has no %q", line)
		}
	}

	// Another data dir, binary and agent flags; a file written.
	dataDir, binary := t.TempDir(), filepath.Join(t.TempDir(), "curator")
	if err := os.WriteFile(binary, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "curator-agent.service")
	if _, err := runCLI(t, "agent", "install-unit", "--data-dir", dataDir, "--binary", binary, "--output", path, "--", "--docker-socket", "/run/docker.sock"); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "ExecStart="+binary+" agent run --data-dir "+dataDir+" --docker-socket /run/docker.sock\n") {
		t.Errorf("unit with other paths:\n%s", data)
	}

	// What a unit's command line cannot hold, and what this machine
	// cannot run, is refused with the reason, nothing written.
	notExec := filepath.Join(t.TempDir(), "curator")
	if err := os.WriteFile(notExec, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--binary", binary, "--data-dir", "relative/dir"}, "want absolute paths"},
		{[]string{"--binary", binary, "--data-dir", "/a dir"}, "takes no spaces"},
		{[]string{"--binary", "/bin/$x", "--data-dir", dataDir}, "takes no spaces"},
		{[]string{"--binary", binary, "--data-dir", dataDir, "--", "--log-level", "debug;rm"}, "takes no spaces"},
		{[]string{"--binary", binary, "--data-dir", dataDir, "--log-level"}, "unknown flag"},
		{[]string{"--binary", binary, "--data-dir", dataDir, "stray"}, "go after --"},
		{[]string{"--binary", "/nonexistent/curator", "--data-dir", dataDir}, "--binary /nonexistent/curator: no such file or directory: the unit would run a binary that is not there"},
		{[]string{"--binary", notExec, "--data-dir", dataDir}, "not an executable file"},
		{[]string{"--binary", dataDir, "--data-dir", dataDir}, "not an executable file"},
		{[]string{"--binary", binary, "--data-dir", "/nonexistent/data"}, "--data-dir /nonexistent/data: no such file or directory: make the node first"},
		{[]string{"--binary", binary, "--data-dir", binary}, "not a directory"},
	}
	// Without --binary the unit runs this binary, the test's, which go
	// test builds into a temporary dir (Bazel's runner keeps its own).
	if exe, err := os.Executable(); err == nil && strings.Contains(exe, string(filepath.Separator)+"go-build") {
		cases = append(cases, struct {
			args []string
			want string
		}{[]string{"--data-dir", dataDir}, "is a temporary one (go run?)"})
	}
	for _, tc := range cases {
		out := filepath.Join(t.TempDir(), "u.service")
		_, err := runCLI(t, append([]string{"agent", "install-unit", "--output", out}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("install-unit %v: %v, want an error saying %q", tc.args, err, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("install-unit %v wrote a unit", tc.args)
		}
	}

	// A unit file that exists is kept without --force.
	before, _ := os.ReadFile(path)
	_, err = runCLI(t, "agent", "install-unit", "--binary", binary, "--data-dir", dataDir, "--output", path)
	if err == nil || !strings.Contains(err.Error(), "exists: pass --force") {
		t.Errorf("install-unit over an existing file: %v, want a refusal naming --force", err)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Errorf("a refused install-unit changed %s:\n%s", path, after)
	}
	if _, err := runCLI(t, "agent", "install-unit", "--binary", binary, "--data-dir", dataDir, "--output", path, "--force"); err != nil {
		t.Errorf("install-unit --force: %v", err)
	}
	if after, _ := os.ReadFile(path); strings.Contains(string(after), "--docker-socket") {
		t.Errorf("install-unit --force did not write over %s:\n%s", path, after)
	}
}

var logTime = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d`)

// Under journald (JOURNAL_STREAM names stderr) a log line has no time of
// its own; elsewhere it does.
func TestAgentLogUnderJournal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// journald's check reads file descriptor 2, so the file takes its
	// place there for the test.
	saved, err := unix.Dup(2)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Dup2(int(f.Fd()), 2); err != nil {
		t.Fatal(err)
	}
	defer func() {
		unix.Dup2(saved, 2)
		unix.Close(saved)
	}()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	line := func(journal string) string {
		t.Helper()
		t.Setenv("JOURNAL_STREAM", journal)
		if err := f.Truncate(0); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Seek(0, 0); err != nil {
			t.Fatal(err)
		}
		lg, err := newLogger("info", f)
		if err != nil {
			t.Fatal(err)
		}
		lg.Info("hello")
		data, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	if got := line(fmt.Sprintf("%d:%d", st.Dev, st.Ino)); logTime.MatchString(got) || !strings.Contains(got, "hello") {
		t.Errorf("under journald: %q, want the line without a time", got)
	}
	for _, other := range []string{"", "1:2", "garbage"} {
		if got := line(other); !logTime.MatchString(got) {
			t.Errorf("JOURNAL_STREAM=%q (not stderr's): %q, want a time first", other, got)
		}
	}
}
