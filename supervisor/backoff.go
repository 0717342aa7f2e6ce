package supervisor

import (
	"math/rand/v2"
	"time"

	"github.com/curatorproject/curator/internal/backoff"
)

// Clock is the supervisor's only source of time.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// nextBackoff returns the nominal backoff after a failure, given the nominal
// backoff before it (zero if the runnable has not failed yet or was reset):
// the initial wait, doubled after each further failure up to maximum.
func nextBackoff(prev, initial, maximum time.Duration) time.Duration {
	return backoff.Policy{Initial: initial, Factor: 2, Max: maximum}.Next(prev)
}

// jittered shortens d by up to fraction of it; r is a uniform sample in [0, 1).
func jittered(d time.Duration, fraction, r float64) time.Duration {
	return d - time.Duration(float64(d)*fraction*r)
}

func randomJitter(d time.Duration, fraction float64) time.Duration {
	if fraction == 0 {
		return d
	}
	return jittered(d, fraction, rand.Float64())
}
