package main

import (
	"strings"
	"testing"
)

// The dashboard listens on loopback unless told otherwise in so many words.
func TestUIListen(t *testing.T) {
	for _, tc := range []struct {
		listen string
		remote bool
		want   string
	}{
		{"127.0.0.1:8080", false, ""},
		{"127.0.212.2:8080", false, ""},
		{"[::1]:8080", false, ""},
		{"localhost:8080", false, ""},
		{"0.0.0.0:8080", false, "--allow-remote"},
		{"10.0.0.1:8080", false, "not a loopback address"},
		{":8080", false, "not a loopback address"},
		{"0.0.0.0:8080", true, ""},
		{"8080", false, "want IP:PORT"},
	} {
		err := checkUIListen(tc.listen, tc.remote)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("checkUIListen(%q, %v) = %v, want %q", tc.listen, tc.remote, err, tc.want)
		}
	}
}
