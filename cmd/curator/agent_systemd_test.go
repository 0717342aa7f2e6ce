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
	out, err := runCLI(t, "agent", "install-unit", "--output", "-")
	if err != nil {
		t.Fatal(err)
	}
	if out != want {
		t.Errorf("install-unit writes\n%s\nbut deploy/systemd/curator-agent.service holds\n%s\n(regenerate it: curator agent install-unit --output deploy/systemd/curator-agent.service)", out, want)
	}
	for _, line := range []string{"Type=notify", "Restart=on-failure", fmt.Sprintf("RestartPreventExitStatus=%d", exitRefused), "ExecStart=/usr/local/bin/curator agent run --data-dir /var/lib/curator\n"} {
		if !strings.Contains(out, line) {
			t.Errorf("the unit has no %q", line)
		}
	}

	// Another data dir, binary and agent flags; a file written.
	path := filepath.Join(t.TempDir(), "curator-agent.service")
	if _, err := runCLI(t, "agent", "install-unit", "--data-dir", "/srv/curator", "--binary", "/opt/curator", "--output", path, "--", "--docker-socket", "/run/docker.sock"); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "ExecStart=/opt/curator agent run --data-dir /srv/curator --docker-socket /run/docker.sock\n") {
		t.Errorf("unit with other paths:\n%s", data)
	}

	// What a unit's command line cannot hold is refused, nothing written.
	for _, args := range [][]string{
		{"--data-dir", "relative/dir"},
		{"--data-dir", "/a dir"},
		{"--binary", "/bin/$x"},
		{"--", "--log-level", "debug;rm"},
		{"--log-level"},
		{"stray"},
	} {
		out := filepath.Join(t.TempDir(), "u.service")
		if _, err := runCLI(t, append([]string{"agent", "install-unit", "--output", out}, args...)...); err == nil {
			t.Errorf("install-unit %v: no error", args)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("install-unit %v wrote a unit", args)
		}
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
