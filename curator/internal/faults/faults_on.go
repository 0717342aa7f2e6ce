//go:build faults

package faults

import (
	"fmt"
	"os"
	"strings"
)

// Fault points, compiled in with -tags faults. CURATOR_FAULT names the
// points (comma-separated) at which the process exits at once with status
// 99, as if the machine died there: no deferred function runs, nothing is
// flushed, the election lease is left to expire.
var faultPoints = func() map[string]bool {
	m := map[string]bool{}
	for _, p := range strings.Split(os.Getenv(Env), ",") {
		if p = strings.TrimSpace(p); p != "" {
			m[p] = true
		}
	}
	return m
}()

// Enabled says whether this binary was built with fault points.
const Enabled = true

// Point is a point at which the process dies at once, if CURATOR_FAULT
// names it.
func Point(name string) {
	if faultPoints[name] {
		fmt.Fprintf(os.Stderr, "CURATOR_FAULT: dying at %s\n", name)
		os.Exit(99)
	}
}

// Armed says whether CURATOR_FAULT names name: for the points that
// change what the process does instead of ending it (ReadStale500ms).
func Armed(name string) bool { return faultPoints[name] }
