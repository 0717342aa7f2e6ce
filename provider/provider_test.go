package provider

import "testing"

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
