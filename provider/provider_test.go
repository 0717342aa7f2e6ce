package provider

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMatches(t *testing.T) {
	labels := map[string]string{LabelCluster: "c1", LabelGroup: "workers", LabelConfigSHA: "abc"}
	for _, tc := range []struct {
		name     string
		selector map[string]string
		want     bool
	}{
		{"empty selector matches all", nil, true},
		{"one label", map[string]string{LabelGroup: "workers"}, true},
		{"every label", map[string]string{LabelCluster: "c1", LabelGroup: "workers", LabelConfigSHA: "abc"}, true},
		{"other value", map[string]string{LabelGroup: "managers"}, false},
		{"missing key", map[string]string{"tier": "web"}, false},
		{"empty value is not absence", map[string]string{"tier": ""}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Matches(labels, tc.selector); got != tc.want {
				t.Errorf("Matches(%v) = %v, want %v", tc.selector, got, tc.want)
			}
		})
	}
}

func TestExpandArgs(t *testing.T) {
	args := []string{"agent", "init", "--listen", "{{address}}", "--data-dir={{data-dir}}", "{{data-dir}}/x/{{data-dir}}", "{{other}}", "--name", "w-{{instance-id}}"}
	got := ExpandArgs(args, "i-1", "10.0.0.2:7000", "/var/lib/curator")
	want := []string{"agent", "init", "--listen", "10.0.0.2:7000", "--data-dir=/var/lib/curator", "/var/lib/curator/x//var/lib/curator", "{{other}}", "--name", "w-i-1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ExpandArgs (-want +got):\n%s", diff)
	}
	if args[3] != "{{address}}" {
		t.Errorf("ExpandArgs changed its input: %v", args)
	}
}
