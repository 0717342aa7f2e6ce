//go:build !faults

package faults

import "time"

// Enabled says whether this binary was built with fault points (see
// faults_on.go): without the faults tag they compile to nothing.
const Enabled = false

// Point is a fault point: nothing without the faults tag.
func Point(string) {}

// delay is a point's delay: none without the faults tag.
func delay(string) {}

// Armed says whether CURATOR_FAULT names the read-side point name:
// never without the faults tag (a constant false, so that the code it
// guards compiles to nothing).
func Armed(string) bool { return false }

// Now is the curator's clock: the host's without the faults tag.
func Now() time.Time { return time.Now() }
