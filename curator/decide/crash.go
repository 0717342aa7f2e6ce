package decide

// ProbeResult is what dialling one port said.
type ProbeResult int

const (
	ProbeOpen    ProbeResult = iota + 1 // a connection was accepted
	ProbeRefused                        // the host refused it: nothing listens
	ProbeSilent                         // a timeout, or any other error
)

func (r ProbeResult) String() string {
	switch r {
	case ProbeOpen:
		return "open"
	case ProbeRefused:
		return "refused"
	case ProbeSilent:
		return "silent"
	}
	return "unknown"
}

// CrashDecision is what the watch does about one probe of the leader.
type CrashDecision int

const (
	CrashNone    CrashDecision = iota // the leader may be alive
	CrashConfirm                      // both ports refuse: look again
	CrashRevoke                       // both refused twice: revoke its lease
)

// Crash is the crash watch's rule, a pure function of the two ports'
// probes, whether they refused on the last look too, and whether the
// leader's lease is known.
func Crash(grpcPort, etcdPort ProbeResult, refusedBefore, leaseKnown, newerKey bool) CrashDecision {
	if !leaseKnown {
		return CrashNone
	}
	if newerKey {
		return CrashRevoke
	}
	if grpcPort != ProbeRefused || etcdPort != ProbeRefused {
		return CrashNone
	}
	if !refusedBefore {
		return CrashConfirm
	}
	return CrashRevoke
}
