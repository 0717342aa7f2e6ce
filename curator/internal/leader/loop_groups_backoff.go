package leader

import (
	"fmt"
	"sync"
	"time"

	"github.com/curatorproject/curator/curator/decide"
	"github.com/curatorproject/curator/internal/backoff"
)

// A group whose new machines die before their nodes join (a bad template
// argument, an address some other process holds, a binary that crashes)
// would otherwise have one made every tick: rule 4 sees one machine too
// few the moment the last one is gone. Like a crash-loop backoff, the
// group loop holds the group's next provision back, 1 s after the first
// such death, doubling each time, to at most a minute, and says why in an
// event with the dead machine's last words where its provider keeps them.
// A machine of the group whose node joins ends the backoff, and so does a
// new config SHA (the operator's fix).
//
// A provider that refuses to make or destroy a machine (a binary deleted
// since the commit, an image gone, an address pool used up by others, the
// provider's own error) is the same kind of failure, of that group alone:
// it counts in the same backoff, holds the group's next provider call
// (a provision, or a destroy after a destroy failed), and is an event
// with the provider's reason, at most one per wait. The loop goes on with
// the other groups; it never fails on a group's provider.
//
// A machine the loop made, or one the provider listed with no node of its
// instance, that is then no longer listed while still no node names it
// died before joining, unless the loop destroyed it itself. What the
// provider lists counts as well as what the loop made, so a new leader
// goes on where the last left off (its count starting from zero); what
// the loop made counts as well as what it saw, since a machine can be
// made and die between two looks.

// crashBackoff's wait after the n-th failure in a row: 1 s doubled up to
// a minute.
var crashWait = backoff.Policy{Initial: time.Second, Factor: 2, Max: time.Minute}

// crashBackoff is the group loop's memory of deaths before joining, per
// group; the zero value is ready to use.
type crashBackoff struct {
	mu     sync.Mutex
	groups map[string]*groupCrashes
}

type groupCrashes struct {
	// unjoined: the machines listed at the last look with no node of
	// their instance, and those made since, with their config SHAs.
	unjoined map[string]string
	// destroyed: the machines this loop destroyed since the last look.
	destroyed map[string]bool
	// listed: the machines listed at the last look; seen: those this
	// loop has seen listed, made or named by a node, while they are
	// listed or dead; reported: the dead ones counted by foundDead.
	listed, seen, reported map[string]bool
	// joined: the listed machines whose node this loop saw joined, with
	// their config SHAs. One that goes after its node did, or with it
	// (agent leave, node rm), left: no death before joining, and no
	// failure.
	joined map[string]string
	// sha is the config SHA the deaths were counted under.
	sha string
	// deaths in a row (machines dead before joining, and provider
	// calls refused), and until when provisions wait.
	deaths int
	until  time.Time
	// destroyRefused: the last failure was a destroy the provider
	// refused; destroys wait until then too.
	destroyRefused bool
}

func (b *crashBackoff) group(name string) *groupCrashes {
	if b.groups == nil {
		b.groups = map[string]*groupCrashes{}
	}
	g, ok := b.groups[name]
	if !ok {
		g = &groupCrashes{unjoined: map[string]string{}, destroyed: map[string]bool{}, listed: map[string]bool{}, seen: map[string]bool{}, reported: map[string]bool{}, joined: map[string]string{}}
		b.groups[name] = g
	}
	return g
}

// crashDeath is one machine found dead before its node joined.
type crashDeath struct {
	Machine string
	// ConfigSHA is the config the machine was made from: only a death of
	// a rollout's target counts as the rollout's failed machine (one of
	// the config before, dying after a rollback began, is not the
	// rollback's).
	ConfigSHA string
	// Unseen: an earlier leader made it; this one found it dead.
	Unseen bool
	// InARow counts it with the deaths before it since the last join.
	InARow int
	// Wait is how long the group's next provision waits.
	Wait time.Duration
	// Left: its node had joined and left the cluster (agent leave, node
	// rm) before it went: no death before joining, counted nowhere.
	Left bool
	// FailsRollout: the group's rollout counts it as a failed machine
	// (failsRollout), which makes no next one the way a crash loop does.
	FailsRollout bool
}

// observe takes a look at group name (its config SHA, the machines its
// provider lists and its nodes) at now, and returns the machines that
// died before joining since the last look.
func (b *crashBackoff) observe(name, sha string, machines []decide.GroupMachine, nodes []decide.GroupNode, now time.Time) []crashDeath {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := b.group(name)
	if g.sha != sha {
		g.sha, g.deaths, g.until, g.destroyRefused = sha, 0, time.Time{}, false
	}
	joined := map[string]bool{}
	for _, n := range nodes {
		joined[n.InstanceID] = true
	}
	listed := map[string]bool{}
	for _, m := range machines {
		listed[m.ID] = true
	}
	var out []crashDeath
	for id, machineSHA := range g.unjoined {
		switch {
		case joined[id]:
			g.deaths, g.until, g.destroyRefused = 0, time.Time{}, false
		case !listed[id] && !g.destroyed[id] && g.joined[id] != "":
			out = append(out, crashDeath{Machine: id, ConfigSHA: machineSHA, Left: true})
		case !listed[id] && !g.destroyed[id]:
			wait := g.fail(now, false)
			out = append(out, crashDeath{Machine: id, ConfigSHA: machineSHA, InARow: g.deaths, Wait: wait})
		}
	}
	// Gone with its node since the last look, which saw it joined.
	for id, machineSHA := range g.joined {
		if _, pending := g.unjoined[id]; !pending && !listed[id] && !joined[id] && !g.destroyed[id] {
			out = append(out, crashDeath{Machine: id, ConfigSHA: machineSHA, Left: true})
		}
	}
	for _, d := range out {
		g.reported[d.Machine] = true
	}
	clear(g.unjoined)
	clear(g.destroyed)
	g.listed = listed
	for _, m := range machines {
		g.seen[m.ID] = true
		if joined[m.ID] {
			g.joined[m.ID] = m.ConfigSHA
		} else {
			g.unjoined[m.ID] = m.ConfigSHA
		}
	}
	for id := range g.joined {
		if !listed[id] {
			delete(g.joined, id)
		}
	}
	return out
}

// fail counts one more failure in a row at now, a destroy refused or
// not, and returns how long the group's next provider call waits.
func (g *groupCrashes) fail(now time.Time, destroy bool) time.Duration {
	g.deaths++
	wait := crashWait.Wait(g.deaths - 1)
	g.until, g.destroyRefused = now.Add(wait), destroy
	return wait
}

// refused notes that group name's provider refused action k (a
// provision or a destroy) at now: one more failure in a row. It returns
// how many in a row, and how long the group's next provider call waits.
func (b *crashBackoff) refused(name string, k decide.GroupActionKind, now time.Time) (inARow int, wait time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := b.group(name)
	wait = g.fail(now, k == decide.GroupDestroyMachine)
	return g.deaths, wait
}

// foundDead takes the dead machines of group name (the provider keeps
// them: deadKeeper) at now, after observe, and returns as deaths before
// joining those this loop never saw and no node names: a machine an
// earlier leader made (a rollout's surge machine, say) that died before
// its node joined, while no leader looked. Counted once each, as
// observe's deaths are, it fails a rollout and holds the group's
// provisions back the same way. A dead machine a node names joined, and is
// remembered so, until its dir is cleared. (A machine whose node an
// earlier leader removed, that leader dying before it cleared the dir, is
// taken for one too: a death counted more, not a node lost.)
func (b *crashBackoff) foundDead(name string, dead []decide.GroupMachine, nodes []decide.GroupNode, now time.Time) []crashDeath {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := b.group(name)
	named := map[string]bool{}
	for _, n := range nodes {
		named[n.InstanceID] = true
	}
	isDead := map[string]bool{}
	var out []crashDeath
	for _, m := range dead {
		isDead[m.ID] = true
		switch {
		case named[m.ID]:
			g.seen[m.ID] = true
		case g.seen[m.ID] || g.reported[m.ID]:
		default:
			wait := g.fail(now, false)
			g.reported[m.ID] = true
			out = append(out, crashDeath{Machine: m.ID, ConfigSHA: m.ConfigSHA, Unseen: true, InARow: g.deaths, Wait: wait})
		}
	}
	// Forget what is neither listed nor dead nor just made: it was
	// cleared or destroyed.
	for id := range g.seen {
		_, made := g.unjoined[id]
		if !isDead[id] && !g.listed[id] && !made {
			delete(g.seen, id)
		}
	}
	for id := range g.reported {
		if !isDead[id] {
			delete(g.reported, id)
		}
	}
	return out
}

// made notes that the loop made machine id of group name, from config
// sha.
func (b *crashBackoff) made(name, id, sha string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := b.group(name)
	g.unjoined[id] = sha
	g.seen[id] = true
}

// destroyed notes that the loop destroyed machine id of group name: its
// going is not a death.
func (b *crashBackoff) destroyed(name, id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.group(name).destroyed[id] = true
}

// hold says how long group name's next action of kind k still waits at
// now (0: none): a provision after any failure, a destroy after a
// destroy the provider refused.
func (b *crashBackoff) hold(name string, k decide.GroupActionKind, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := b.group(name)
	switch {
	case k == decide.GroupProvision, k == decide.GroupDestroyMachine && g.destroyRefused:
		return max(g.until.Sub(now), 0)
	}
	return 0
}

// forget drops group name (deleted).
func (b *crashBackoff) forget(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.groups, name)
}

// failsRollout says whether death d is a failed machine of the rollout
// of the group snapshot s: a machine of its target. One of another
// config (a bad template's, dying once its rollback has begun) is not:
// counted against the rollback, it failed the rollback, which stops
// there.
func (d crashDeath) failsRollout(s decide.GroupSnapshot) bool {
	return s.Rolling && d.ConfigSHA == s.TargetSHA && !d.Left
}

// reason is the event's reason for death d of group name.
func (d crashDeath) reason(name, lastWords string) string {
	if d.Left {
		return fmt.Sprintf("group %s: machine %s exited after its node left the cluster (agent leave, or node rm): not a crash; the group makes another to keep its size", name, d.Machine)
	}
	next := fmt.Sprintf("the next is made in %v", d.Wait)
	if d.FailsRollout {
		next = "a failed machine of the rollout"
	}
	s := fmt.Sprintf("group %s: machine %s exited before its node joined (%d in a row); %s", name, d.Machine, d.InARow, next)
	if d.Unseen {
		s = fmt.Sprintf("group %s: machine %s, made by an earlier leader, was found dead with no node of it: it exited before its node joined (%d in a row); %s", name, d.Machine, d.InARow, next)
	}
	if lastWords != "" {
		s += "; its last words: " + lastWords
	}
	return s
}
