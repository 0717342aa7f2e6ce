package spec

import "testing"

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
