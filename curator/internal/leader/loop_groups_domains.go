package leader

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/curatorproject/curator/provider"
)

// darkDomains is the group loop's memory of when it first saw each
// group's dark domains dark: domain_hold counts from then. Only the
// group loop reaches it.
type darkDomains struct {
	mu    sync.Mutex
	since map[string]map[string]time.Time // group -> domain -> since
}

// seen notes group's dark domains at now, forgets those no longer dark,
// and returns when each was first seen dark.
func (d *darkDomains) seen(group string, dark map[string]string, now time.Time) map[string]time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.since == nil {
		d.since = map[string]map[string]time.Time{}
	}
	was := d.since[group]
	out := make(map[string]time.Time, len(dark))
	for _, dom := range slices.Sorted(maps.Keys(dark)) {
		if t, ok := was[dom]; ok {
			out[dom] = t
		} else {
			out[dom] = now
		}
	}
	if len(out) == 0 {
		delete(d.since, group)
		return out
	}
	d.since[group] = out
	return maps.Clone(out)
}

// partial takes a listing's error: one that names the failure domains
// the provider could not list (provider.UnreachableError) is noted in
// gl, beside what it did list, and is no error; any other is returned.
func (gl *groupListed) partial(err error) error {
	down, ok := provider.Unreachable(err)
	if !ok {
		return err
	}
	if gl.unreachable == nil {
		gl.unreachable = map[string]string{}
	}
	maps.Copy(gl.unreachable, unreachableWords(down))
	return nil
}

// unreachableWords is why each domain a provider could not list is dark.
func unreachableWords(down map[string]error) map[string]string {
	out := make(map[string]string, len(down))
	for d, err := range down {
		out[d] = "its provider cannot list it: " + err.Error()
	}
	return out
}

// latestOf is the latest of ts.
func latestOf(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if t.After(out) {
			out = t
		}
	}
	return out
}
