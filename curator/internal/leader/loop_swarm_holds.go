package leader

import (
	"fmt"
	"sync"
	"time"

	"github.com/curatorproject/curator/curator/decide"
)

// A Swarm call that fails (the engine times out, the Swarm answers with
// an error) would otherwise be the first change of every tick after it,
// and the changes behind it would wait as long as it fails. The swarm
// sync holds a change whose call failed back, 2 s after the first
// failure, doubling with each failure in a row, to at most a minute, and
// decides without it meanwhile: the changes behind it go on, each with
// its own guards (a change held back is one not made, never one assumed
// made). A held change is tried again once its hold ends; going through
// ends it. The holds live with the leadership: a new leader tries every
// change at once.

const (
	swarmHoldFirst = 2 * time.Second
	SwarmHoldMax   = time.Minute
)

// swarmHolds is the swarm sync's memory of failed changes; the zero
// value is ready to use.
type swarmHolds struct {
	mu    sync.Mutex
	byKey map[string]*swarmHold
}

type swarmHold struct {
	// failures in a row, the last one's error, and until when the change
	// is held back.
	failures int
	last     error
	until    time.Time
}

// fail notes that change a failed with err at now, and returns how long
// it is held back.
func (h *swarmHolds) fail(a *decide.SwarmAction, err error, now time.Time) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byKey == nil {
		h.byKey = map[string]*swarmHold{}
	}
	hd, ok := h.byKey[a.Key()]
	if !ok {
		hd = &swarmHold{}
		h.byKey[a.Key()] = hd
	}
	hd.failures++
	hd.last = err
	wait := swarmHoldFirst
	for i := 1; i < hd.failures && wait < SwarmHoldMax; i++ {
		wait *= 2
	}
	wait = min(wait, SwarmHoldMax)
	hd.until = now.Add(wait)
	return wait
}

// done forgets change a: it went through.
func (h *swarmHolds) done(a *decide.SwarmAction) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.byKey, a.Key())
}

// held returns the changes held back at now, by key, each with why, for
// the decision (swarmSnapshot.held). A change whose hold has ended is not
// among them, but is remembered, so that failing again holds it longer.
func (h *swarmHolds) held(now time.Time) map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var m map[string]string
	for key, hd := range h.byKey {
		if !now.Before(hd.until) {
			continue
		}
		if m == nil {
			m = map[string]string{}
		}
		m[key] = fmt.Sprintf("its Swarm call failed (%d in a row, the last: %v): it is held back, the changes behind it going on", hd.failures, hd.last)
	}
	return m
}
