package faults

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseDelays(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]time.Duration
		err  string
	}{
		{"", map[string]time.Duration{}, ""},
		{" , ", map[string]time.Duration{}, ""},
		{"rollout/after-provision=2s, api/before-reply=300ms", map[string]time.Duration{RolloutAfterProvision: 2 * time.Second, APIBeforeReply: 300 * time.Millisecond}, ""},
		{"membership/before-member-remove=1s", map[string]time.Duration{BeforeMemberRemove: time.Second}, ""},
		{"api/before-reply", nil, "is not POINT=DURATION"},
		{"api/no-such-point=1s", nil, `no fault point "api/no-such-point"`},
		{"read/stale-500ms=1s", nil, "no fault point"},
		{"api/before-reply=soon", nil, "invalid duration"},
		{"api/before-reply=0s", nil, "above 0"},
		{"api/before-reply=-1s", nil, "above 0"},
		{"api/before-reply=2m", nil, "at most a minute"},
		{"api/before-reply=1s,api/before-reply=2s", nil, "given twice"},
	} {
		got, err := ParseDelays(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), DelayEnv) {
				t.Errorf("ParseDelays(%q) = %v, %v; want an error naming %s and saying %q", tc.in, got, err, DelayEnv, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseDelays(%q): %v", tc.in, err)
			continue
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("ParseDelays(%q) (-want +got):\n%s", tc.in, d)
		}
	}
}

func TestParseClockSkew(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"", 0, ""},
		{"+3s", 3 * time.Second, ""},
		{"-1500ms", -1500 * time.Millisecond, ""},
		{"2s", 2 * time.Second, ""},
		{"ahead", 0, "invalid duration"},
		{"+2h", 0, "at most an hour"},
	} {
		got, err := ParseClockSkew(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseClockSkew(%q) = %v, %v; want an error saying %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseClockSkew(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// Every point a delay may be given is a distinct name.
func TestPointsDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range Points {
		if seen[p] {
			t.Errorf("%s listed twice", p)
		}
		seen[p] = true
	}
}
