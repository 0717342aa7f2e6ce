//go:build !faults

package curator

// FaultsEnabled says whether this binary was built with fault points (see
// faults_on.go): without the faults tag they compile to nothing.
const FaultsEnabled = false

func faultPoint(string) {}
