//go:build !faults

package faults

// Enabled says whether this binary was built with fault points (see
// faults_on.go): without the faults tag they compile to nothing.
const Enabled = false

// Point is a fault point: nothing without the faults tag.
func Point(string) {}
