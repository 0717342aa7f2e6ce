package leader

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/curatorproject/curator/provider"
)

// listWait bounds how long a tick of the group loop waits on one group's
// provider to list its machines.
const listWait = 2 * time.Second

// listings are the group loop's listings of each group's machines, at
// most one in flight per group. A provider that hangs (a plugin stuck on a
// cloud's API, a Docker daemon that accepts and never answers) holds its
// own group, never the others: a tick waits on a listing at most
// listWait, and a listing not done by then goes on in the background; the
// group is refused for the tick (errStillListing), and a later tick takes
// the listing once it is done, without asking the provider again
// meanwhile. A listing taken late is still the group's latest: the group
// makes and destroys nothing while its listing is in flight.
type listings struct {
	wait     time.Duration
	mu       sync.Mutex
	inFlight map[string]*listing
}

// listing is one group's listing of its machines.
type listing struct {
	done   chan struct{}
	listed groupListed
	err    error
}

// groupListed is what a group's provider listed: its machines, and the
// dead ones it keeps.
type groupListed struct {
	machines, dead []provider.Instance
	// unreachable are the failure domains the provider could not list,
	// with why (see partial).
	unreachable map[string]string
}

// errStillListing: the group's provider has not listed its machines
// within the tick's wait; the listing goes on.
type errStillListing struct{ wait time.Duration }

func (e errStillListing) Error() string {
	return fmt.Sprintf("it has not listed the group's machines within %v (still asking; the other groups are served meanwhile)", e.wait)
}

// take returns group name's listing: the one in flight, or a new one made
// by list with ctx (the loop's, so that it ends with the leadership); it
// waits for it at most ls.wait, and says errStillListing past that.
func (ls *listings) take(ctx context.Context, name string, list func(context.Context) (groupListed, error)) (groupListed, error) {
	ls.mu.Lock()
	if ls.inFlight == nil {
		ls.inFlight = map[string]*listing{}
	}
	l := ls.inFlight[name]
	if l == nil {
		l = &listing{done: make(chan struct{})}
		ls.inFlight[name] = l
		go func() {
			defer close(l.done)
			l.listed, l.err = list(ctx)
		}()
	}
	ls.mu.Unlock()
	t := time.NewTimer(ls.wait)
	defer t.Stop()
	select {
	case <-l.done:
	case <-t.C:
		return groupListed{}, errStillListing{ls.wait}
	case <-ctx.Done():
		return groupListed{}, ctx.Err()
	}
	ls.mu.Lock()
	if ls.inFlight[name] == l {
		delete(ls.inFlight, name)
	}
	ls.mu.Unlock()
	return l.listed, l.err
}
