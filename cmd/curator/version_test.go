package main

import (
	"encoding/json"
	"runtime/debug"
	"strings"
	"testing"
)

func TestReleaseOf(t *testing.T) {
	vcs := func(mainVersion, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Path: "github.com/curatorproject/curator", Version: mainVersion}, Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "2a25bf7af479f04ee0d73da23d350922d8533566"},
			{Key: "vcs.time", Value: "2026-12-05T07:45:45Z"},
			{Key: "vcs.modified", Value: modified},
		}}
	}
	for _, tc := range []struct {
		name          string
		stamp, commit string
		bi            *debug.BuildInfo
		want          string
		wantCommit    string
	}{
		{"stamped", "v0.3.0", "feedface", vcs("(devel)", "false"), "v0.3.0", "feedface"},
		{"stamped release, commit from the build", "v0.3.0", "", vcs("(devel)", "false"), "v0.3.0", "2a25bf7af479f04ee0d73da23d350922d8533566"},
		{"a checkout", "", "", vcs("(devel)", "false"), nextRelease + "-dev+2a25bf7af479", "2a25bf7af479f04ee0d73da23d350922d8533566"},
		{"a checkout with changes", "", "", vcs("(devel)", "true"), nextRelease + "-dev+2a25bf7af479.dirty", "2a25bf7af479f04ee0d73da23d350922d8533566"},
		// Go 1.24 and later make a pseudo-version of an untagged commit:
		// it names no release.
		{"a pseudo-version", "", "", vcs("v0.0.0-20261205074545-2a25bf7af479", "false"), nextRelease + "-dev+2a25bf7af479", "2a25bf7af479f04ee0d73da23d350922d8533566"},
		{"a tagged module", "", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.4.1"}}, "v0.4.1", ""},
		{"a tagged checkout with changes", "", "", vcs("v0.4.1+dirty", "true"), "v0.4.1", "2a25bf7af479f04ee0d73da23d350922d8533566"},
		{"nothing known", "", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev", ""},
		{"no build information", "", "", nil, "dev", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := releaseOf(tc.stamp, tc.commit, tc.bi)
			if r.Release != tc.want || r.Commit != tc.wantCommit {
				t.Errorf("release %q commit %q, want %q and %q", r.Release, r.Commit, tc.want, tc.wantCommit)
			}
		})
	}
}

// TestVersionCommand: `curator version` says the release and the commit
// this test binary knows, and -o json has the contract's keys.
func TestVersionCommand(t *testing.T) {
	want := currentRelease()
	out, err := runCLI(t, "version")
	if err != nil {
		t.Fatal(err)
	}
	if first := strings.SplitN(out, "\n", 2)[0]; first != "curator "+want.Release {
		t.Errorf("first line %q, want %q", first, "curator "+want.Release)
	}
	if !strings.Contains(out, "commit:") || !strings.Contains(out, want.Go) {
		t.Errorf("no commit or Go version in:\n%s", out)
	}
	out, err = runCLI(t, "version", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"release", "commit", "modified", "commit_time", "go", "platform"} {
		if _, ok := m[key]; !ok {
			t.Errorf("no %q in %s", key, out)
		}
	}
	if m["release"] != want.Release {
		t.Errorf("release %v, want %s", m["release"], want.Release)
	}
	if out, err = runCLI(t, "--version"); err != nil || out != "curator "+want.Release+"\n" {
		t.Errorf("--version: %q, %v", out, err)
	}
}
