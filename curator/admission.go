package curator

import (
	"fmt"
	"sync"
	"time"

	"github.com/curatorproject/curator/curator/spec"
)

// Session admission. A session set-up (a node's new Heartbeat stream) costs
// a manager far more than a heartbeat: often a TLS handshake, two streams
// opened through to the leader, the leader's bookkeeping. When a manager
// dies, or the leader does, thousands of nodes set up sessions at once.
// Taken as they come, they crowd out the heartbeats of nodes already
// settled, answers come late, and sessions that were fine break too: the
// wave feeds itself.
//
// So every manager admits set-ups at a rate (Config.SessionRate, with
// SessionBurst at once above it), and tells each one it refuses when to
// come back (an Unavailable with a RetryInfo; the agent waits that long):
// the refused get slots one after another at the same rate, behind those
// already handed out, so they come back spread over the time the manager
// needs to take them all instead of knocking again together. A set-up
// forwarded to the leader passes the leader's gate too, so the leader is
// never offered more than its own rate, however many managers forward.
//
// The decision is decideAdmission, a pure function of the gate's state
// and the time (a GCRA, the virtual-scheduling form of a token bucket,
// plus the last slot handed to a refused set-up).

// admissionState is a gate's memory.
type admissionState struct {
	// tat is the bucket's theoretical arrival time: the bucket is full
	// when it is not after now, and each admission moves it on by one
	// emission interval.
	tat time.Time
	// comeBack is the last slot handed to a refused set-up.
	comeBack time.Time
}

// decideAdmission admits a set-up at now, or refuses it with the wait until
// its slot. rate is set-ups per second (at least one), burst how many may
// come at once above it.
func decideAdmission(s admissionState, now time.Time, rate float64, burst int) (ok bool, wait time.Duration, next admissionState) {
	rate = max(rate, 1)
	emission := time.Duration(float64(time.Second) / rate)
	tolerance := time.Duration(max(burst, 0)) * emission
	tat := s.tat
	if tat.Before(now) {
		tat = now
	}
	next = s
	if tat.Sub(now) <= tolerance {
		next.tat = tat.Add(emission)
		return true, 0, next
	}
	// The earliest a set-up is admitted again is when tat-tolerance
	// comes; the refused queue up behind that and behind each other.
	slot := tat.Add(-tolerance)
	if c := s.comeBack.Add(emission); c.After(slot) {
		slot = c
	}
	next.comeBack = slot
	return false, slot.Sub(now), next
}

// sessionGate is one manager's admission of session set-ups.
type sessionGate struct {
	rate  float64
	burst int

	mu    sync.Mutex
	state admissionState
}

func newSessionGate(rate float64, burst int) *sessionGate {
	return &sessionGate{rate: rate, burst: burst}
}

// admit admits a set-up at now, or returns ErrSessionsPaced saying when
// to come back.
func (g *sessionGate) admit(now time.Time) error {
	g.mu.Lock()
	ok, wait, next := decideAdmission(g.state, now, g.rate, g.burst)
	g.state = next
	g.mu.Unlock()
	if ok {
		return nil
	}
	return withComeBack(fmt.Errorf("%w: it takes %g set-ups a second; come back in %s", spec.ErrSessionsPaced, g.rate, wait.Round(time.Millisecond)), wait)
}

// later books a slot for a set-up this manager cannot serve for a reason
// of its own (no leader known yet) and returns its wait: those set-ups
// come back spread too, not all at the end of the election.
func (g *sessionGate) later(now time.Time) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	emission := time.Duration(float64(time.Second) / max(g.rate, 1))
	slot := now
	if c := g.state.comeBack.Add(emission); c.After(slot) {
		slot = c
	}
	g.state.comeBack = slot
	return slot.Sub(now)
}
