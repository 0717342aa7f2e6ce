package curator

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

// MaxVotersLimit is the largest voter limit the cluster accepts.
const MaxVotersLimit = 7

// checkMaxVoters refuses a voter limit outside 1 to MaxVotersLimit.
func checkMaxVoters(n uint32) error {
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
func maxVotersWarning(n uint32) string {
	if n == 0 || n%2 != 0 {
		return ""
	}
	return fmt.Sprintf("max voters is %d, an even number: %d voters tolerate no more failures than %d (a majority of %d is %d); an odd limit (3, 5 or 7) is usual",
		n, n, n-1, n, majority(int(n)))
}
