package spec

import (
	"errors"
	"strings"
	"testing"
)

func TestLowestRelease(t *testing.T) {
	for _, tc := range []struct {
		releases []string
		want     string
	}{
		{nil, ""},
		{[]string{"", ""}, ""},
		{[]string{"v0.2.0", "v0.10.0", "v0.3.1"}, "v0.2.0"},
		// A development build sorts before the release it heads for.
		{[]string{"v0.1.0", "v0.1.0-dev+2a25bf7af479"}, "v0.1.0-dev+2a25bf7af479"},
		{[]string{"v0.1.0", "dev", ""}, "dev"},
		{[]string{"", "v1.0.0"}, "v1.0.0"},
	} {
		if got := LowestRelease(tc.releases); got != tc.want {
			t.Errorf("LowestRelease(%q) = %q, want %q", tc.releases, got, tc.want)
		}
	}
}

func TestCheckReleaseSkew(t *testing.T) {
	for _, tc := range []struct {
		name     string
		role     JoinRole
		release  string
		managers []string
		ok       bool
	}{
		{"a worker on the managers' release", JoinWorker, "v0.2.0", []string{"v0.2.0", "v0.2.1"}, true},
		{"a worker one minor older", JoinWorker, "v0.1.4", []string{"v0.2.0", "v0.3.0"}, true},
		{"a worker two minors older", JoinWorker, "v0.1.4", []string{"v0.3.0"}, false},
		{"a worker newer than the lowest manager", JoinWorker, "v0.3.0", []string{"v0.2.0", "v0.3.0"}, false},
		{"a worker a patch newer", JoinWorker, "v0.2.5", []string{"v0.2.0"}, true},
		{"a worker of a newer major", JoinWorker, "v1.0.0", []string{"v0.9.0"}, false},
		{"a development build of the managers' minor", JoinWorker, "v0.2.0-dev+2a25bf7af479", []string{"v0.2.0"}, true},
		{"a manager one minor ahead (an upgrade)", JoinManager, "v0.3.0", []string{"v0.2.0", "v0.2.1"}, true},
		{"a manager two minors ahead", JoinManager, "v0.4.0", []string{"v0.2.0", "v0.3.0"}, false},
		{"a manager one behind the highest", JoinManager, "v0.2.0", []string{"v0.3.0"}, true},
		{"a manager two behind the highest", JoinManager, "v0.1.0", []string{"v0.2.0", "v0.3.0"}, false},
		{"a manager of another major", JoinManager, "v2.0.0", []string{"v1.9.0"}, false},
		{"a release that is not semver is not judged", JoinWorker, "dev", []string{"v0.2.0"}, true},
		{"managers that are not semver are not judged", JoinManager, "v9.0.0", []string{"dev", "test"}, true},
		{"no managers", JoinWorker, "v0.2.0", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckReleaseSkew(tc.role, tc.release, tc.managers)
			if (err == nil) != tc.ok {
				t.Fatalf("CheckReleaseSkew(%s, %s, %v) = %v, want ok %v", tc.role, tc.release, tc.managers, err, tc.ok)
			}
			if err != nil && (!errors.Is(err, ErrReleaseSkew) || !strings.Contains(err.Error(), tc.release)) {
				t.Errorf("the refusal %q is not a denial naming the release", err)
			}
		})
	}
}
