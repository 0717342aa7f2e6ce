package spec

import "fmt"

// The voter limit (`cluster update --max-voters`). Like Docker Swarm's
// advice on managers, and for the same reason: every etcd write waits for a
// majority of the voters, so more voters make writes slower while they
// tolerate few more failures, and past seven the cost outweighs the gain.
// An odd count is what tolerates failures: a majority of 2k voters is k+1,
// so 2k voters tolerate k-1 failures, no more than 2k-1 voters do.
//
// The limit is refused outside 1 to MaxVotersLimit. An even limit is
// accepted (a cluster may have to pass through an even count, and the
// tests and small clusters use 2), and cluster info warns about it for as
// long as it is set.

// DefaultMaxVoters is the voter limit of a new cluster.
const DefaultMaxVoters = 7

// MaxVotersLimit is the largest voter limit the cluster accepts.
const MaxVotersLimit = 7

// checkMaxVoters refuses a voter limit outside 1 to MaxVotersLimit.
func CheckMaxVoters(n uint32) error {
	switch {
	case n == 0:
		return fmt.Errorf("%w: max voters 0: the cluster needs at least 1 etcd voter (3, 5 or 7 is usual)", ErrInvalid)
	case n > MaxVotersLimit:
		return fmt.Errorf("%w: max voters %d: the limit is %d. Every write waits for a majority of the voters, so more voters make writes slower "+
			"and tolerate few more failures (7 tolerate 3); use 3, 5 or 7, and run more nodes as workers", ErrInvalid, n, MaxVotersLimit)
	}
	return nil
}

// maxVotersWarning is what cluster info says about an even voter limit, or
// "".
func MaxVotersWarning(n uint32) string {
	if n == 0 || n%2 != 0 {
		return ""
	}
	return fmt.Sprintf("max voters is %d, an even number: %d voters tolerate %s, as %d would (a majority of %d is %d); an odd limit (3, 5 or 7) is usual",
		n, n, failures(int(n)), n-1, n, Majority(int(n)))
}

// evenVotersWarning is cluster info's warning about n voters, if n is even.
func EvenVotersWarning(n int) string {
	if n < 2 || n%2 != 0 {
		return ""
	}
	return fmt.Sprintf("%d voters tolerate %s, as %d would (a majority of %d is %d); promote or demote one manager", n, failures(n), n-1, n, Majority(n))
}

// failures says how many voters of n may fail with a majority left.
func failures(n int) string {
	switch f := n - Majority(n); f {
	case 0:
		return "no failure"
	case 1:
		return "1 failure"
	default:
		return fmt.Sprintf("%d failures", f)
	}
}

// Majority is how many of n voters make a majority: etcd elects a leader
// and commits a write only with this many. The one place it is computed.
func Majority(n int) int { return n/2 + 1 }
