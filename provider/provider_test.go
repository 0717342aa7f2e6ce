package provider

import (
	"errors"
	"fmt"
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

func TestUnreachable(t *testing.T) {
	ue := &UnreachableError{Domains: map[string]error{"b": errors.New("no answer"), "a": errors.New("refused")}}
	if got, want := ue.Error(), "could not list every failure domain: domain a: refused; domain b: no answer"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	wrapped := fmt.Errorf("list: %w", ue)
	if down, ok := Unreachable(wrapped); !ok || len(down) != 2 {
		t.Errorf("Unreachable(wrapped) = %v, %v; want both domains", down, ok)
	}
	if _, ok := Unreachable(errors.New("no daemon")); ok {
		t.Error("Unreachable of a plain error: true, want false (nothing is known)")
	}
	if !errors.Is(wrapped, ue.Domains["a"]) {
		t.Error("the domains' errors are not unwrapped")
	}
}
