package leader

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/curatorproject/curator/curator/decide"
)

// TestCrashBackoff follows one group through looks of the group loop: a
// machine that goes unjoined is a death (1 s, then doubling to a minute),
// one the loop destroyed is not, a join ends the backoff, and so does a
// new config SHA.
func TestCrashBackoff(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(ids ...string) []decide.GroupMachine {
		var out []decide.GroupMachine
		for _, id := range ids {
			out = append(out, decide.GroupMachine{ID: id})
		}
		return out
	}
	ns := func(instances ...string) []decide.GroupNode {
		var out []decide.GroupNode
		for _, id := range instances {
			out = append(out, decide.GroupNode{ID: "node-" + id, InstanceID: id})
		}
		return out
	}
	var b crashBackoff
	type look struct {
		sha       string
		machines  []decide.GroupMachine
		nodes     []decide.GroupNode
		made      []string // by the loop before this look
		destroyed []string
		at        time.Duration
		deaths    []crashDeath
		hold      time.Duration
	}
	for i, l := range []look{
		// Two machines, one joined: nothing died.
		{sha: "a", machines: ms("m1", "m2"), nodes: ns("m1"), at: 0},
		// m2 is gone with no node: the first death, 1 s.
		{sha: "a", machines: ms("m1"), nodes: ns("m1"), at: time.Second,
			deaths: []crashDeath{{Machine: "m2", InARow: 1, Wait: time.Second}}, hold: time.Second},
		// The hold runs out.
		{sha: "a", machines: ms("m1"), nodes: ns("m1"), at: 2 * time.Second},
		// m3 made and dead before the next look, seen only as made:
		// 2 s; m4 seen, then dead: 4 s.
		{sha: "a", machines: ms("m1"), nodes: ns("m1"), made: []string{"m3"}, at: 4 * time.Second,
			deaths: []crashDeath{{Machine: "m3", ConfigSHA: "a", InARow: 2, Wait: 2 * time.Second}}, hold: 2 * time.Second},
		{sha: "a", machines: ms("m1", "m4"), nodes: ns("m1"), at: 7 * time.Second},
		{sha: "a", machines: ms("m1"), nodes: ns("m1"), at: 8 * time.Second,
			deaths: []crashDeath{{Machine: "m4", InARow: 3, Wait: 4 * time.Second}}, hold: 4 * time.Second},
		// m5 made, then destroyed by the loop (a scale down): not a
		// death, the backoff stays.
		{sha: "a", machines: ms("m1", "m5"), nodes: ns("m1"), made: []string{"m5"}, at: 13 * time.Second},
		{sha: "a", machines: ms("m1"), nodes: ns("m1"), destroyed: []string{"m5"}, at: 14 * time.Second},
		{sha: "a", machines: ms("m1", "m6"), nodes: ns("m1"), at: 15 * time.Second},
		{sha: "a", machines: ms("m1"), nodes: ns("m1"), at: 16 * time.Second,
			deaths: []crashDeath{{Machine: "m6", InARow: 4, Wait: 8 * time.Second}}, hold: 8 * time.Second},
		// m7 joins and then dies as a node: the backoff ends; a node's
		// death is not a death before joining.
		{sha: "a", machines: ms("m1", "m7"), nodes: ns("m1"), at: 25 * time.Second},
		{sha: "a", machines: ms("m1", "m7"), nodes: ns("m1", "m7"), at: 26 * time.Second},
		{sha: "a", machines: ms("m1"), nodes: ns("m1", "m7"), at: 27 * time.Second},
		{sha: "a", machines: ms("m1", "m8"), nodes: ns("m1"), at: 28 * time.Second},
		{sha: "a", machines: ms("m1"), nodes: ns("m1"), at: 29 * time.Second,
			deaths: []crashDeath{{Machine: "m8", InARow: 1, Wait: time.Second}}, hold: time.Second},
		// A new config SHA (the operator's fix) ends the backoff.
		{sha: "b", machines: ms("m1"), nodes: ns("m1"), at: 29 * time.Second},
		// A machine of config b made, then the config back to a (a
		// rollback), then b's machine dies: the death says its config
		// was b, not the rollback's a (the group loop counts it against
		// no rollout of a).
		{sha: "b", machines: []decide.GroupMachine{{ID: "m1"}, {ID: "m9", ConfigSHA: "b"}}, nodes: ns("m1"), made: []string{"m9"}, at: 30 * time.Second},
		{sha: "a", machines: []decide.GroupMachine{{ID: "m1"}, {ID: "m9", ConfigSHA: "b"}}, nodes: ns("m1"), at: 31 * time.Second},
		{sha: "a", machines: ms("m1"), nodes: ns("m1"), at: 32 * time.Second,
			deaths: []crashDeath{{Machine: "m9", ConfigSHA: "b", InARow: 1, Wait: time.Second}}, hold: time.Second},
	} {
		for _, id := range l.made {
			b.made("g", id, l.sha)
		}
		for _, id := range l.destroyed {
			b.destroyed("g", id)
		}
		now := t0.Add(l.at)
		got := b.observe("g", l.sha, l.machines, l.nodes, now)
		if diff := cmp.Diff(l.deaths, got); diff != "" {
			t.Errorf("look %d: deaths (-want +got):\n%s", i, diff)
		}
		if h := b.hold("g", decide.GroupProvision, now); h != l.hold {
			t.Errorf("look %d: hold %v, want %v", i, h, l.hold)
		}
		if h := b.hold("other", decide.GroupProvision, now); h != 0 {
			t.Errorf("look %d: another group held %v", i, h)
		}
	}

	// The wait doubles to a minute and stays there.
	var c crashBackoff
	var waits []time.Duration
	for i := range 9 {
		id := string(rune('a' + i))
		c.observe("g", "a", ms(id), nil, t0)
		d := c.observe("g", "a", nil, nil, t0)
		if len(d) != 1 {
			t.Fatalf("death %d: %+v", i, d)
		}
		waits = append(waits, d[0].Wait)
	}
	want := []time.Duration{1, 2, 4, 8, 16, 32, 60, 60, 60}
	for i := range want {
		want[i] *= time.Second
	}
	if diff := cmp.Diff(want, waits); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
	c.forget("g")
	if h := c.hold("g", decide.GroupProvision, t0); h != 0 {
		t.Errorf("a forgotten group held %v", h)
	}
}

// TestCrashFailsRollout: a death before joining is the rollout's failed
// machine only if the machine is of the rollout's target. Regression
// (the chaos suite, on Docker): a bad template's machine that died just
// after its rollout failed was counted against the rollback, which
// failed and stopped there.
func TestCrashFailsRollout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		machine string // the dead machine's config SHA
		rolling bool
		target  string
		want    bool
	}{
		{"a machine of the target", "bad", true, "bad", true},
		{"the failed config's machine during the rollback", "bad", true, "good", false},
		{"a machine of no known config", "", true, "good", false},
		{"no rollout", "good", false, "good", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := crashDeath{Machine: "m", ConfigSHA: tc.machine}
			if got := d.failsRollout(decide.GroupSnapshot{Rolling: tc.rolling, TargetSHA: tc.target}); got != tc.want {
				t.Errorf("failsRollout = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestCrashBackoffRefused: a provider's refusal counts in the group's
// crash backoff with its deaths. A refused provision holds the group's
// provisions, not its destroys (a scale down, a machine that never
// joined, still go); a refused destroy holds its destroys too; the next
// config SHA or a node that joins ends the hold; another group is never
// held.
func TestCrashBackoffRefused(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var b crashBackoff
	b.observe("g", "a", nil, nil, t0)
	type hold struct{ provision, destroy time.Duration }
	holds := func(at time.Duration) hold {
		now := t0.Add(at)
		return hold{b.hold("g", decide.GroupProvision, now), b.hold("g", decide.GroupDestroyMachine, now)}
	}
	check := func(what string, got, want hold) {
		t.Helper()
		if got != want {
			t.Errorf("%s: held %+v, want %+v", what, got, want)
		}
	}
	if n, wait := b.refused("g", decide.GroupProvision, t0); n != 1 || wait != time.Second {
		t.Errorf("the first refusal: %d in a row, wait %v; want 1, 1s", n, wait)
	}
	check("a provision refused", holds(0), hold{provision: time.Second})
	check("its wait over", holds(time.Second), hold{})
	if n, wait := b.refused("g", decide.GroupDestroyMachine, t0.Add(time.Second)); n != 2 || wait != 2*time.Second {
		t.Errorf("the second refusal: %d in a row, wait %v; want 2, 2s", n, wait)
	}
	check("a destroy refused", holds(time.Second), hold{provision: 2 * time.Second, destroy: 2 * time.Second})
	// A death before joining after it: provisions wait, destroys go.
	b.made("g", "m1", "a")
	if d := b.observe("g", "a", nil, nil, t0.Add(2*time.Second)); len(d) != 1 || d[0].InARow != 3 {
		t.Fatalf("the death after two refusals: %+v, want the third in a row", d)
	}
	check("a death after a refused destroy", holds(2*time.Second), hold{provision: 4 * time.Second})
	if h := b.hold("other", decide.GroupProvision, t0); h != 0 {
		t.Errorf("another group held %v", h)
	}
	// A node that joins ends it, and so does a new config SHA.
	b.refused("g", decide.GroupDestroyMachine, t0.Add(3*time.Second))
	b.observe("g", "a", []decide.GroupMachine{{ID: "m2"}}, nil, t0.Add(3*time.Second))
	b.observe("g", "a", []decide.GroupMachine{{ID: "m2"}}, []decide.GroupNode{{ID: "n2", InstanceID: "m2"}}, t0.Add(3*time.Second))
	check("a node joined", holds(3*time.Second), hold{})
	b.refused("g", decide.GroupDestroyMachine, t0.Add(3*time.Second))
	b.observe("g", "b", nil, nil, t0.Add(3*time.Second))
	check("a new config", holds(3*time.Second), hold{})
}

// TestCrashFoundDead follows a group through looks of a leader that takes
// over from one that died: a machine the earlier leader made that is found
// dead with no node of it is a death before joining (once, with its config
// SHA, so that it fails a rollout to that config); one that a node names,
// or that this leader saw listed, made or named by a node, is not, when
// its node is removed later; nor is one that observe counted already.
func TestCrashFoundDead(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := func(id string) decide.GroupMachine { return decide.GroupMachine{ID: id, ConfigSHA: "b"} }
	ms := func(ids ...string) []decide.GroupMachine {
		var out []decide.GroupMachine
		for _, id := range ids {
			out = append(out, m(id))
		}
		return out
	}
	ns := func(instances ...string) []decide.GroupNode {
		var out []decide.GroupNode
		for _, id := range instances {
			out = append(out, decide.GroupNode{ID: "node-" + id, InstanceID: id})
		}
		return out
	}
	var b crashBackoff
	for i, l := range []struct {
		machines, dead []decide.GroupMachine
		nodes          []decide.GroupNode
		made           []string // by the loop before this look
		deaths         []crashDeath
	}{
		// The first look: surge (made by the leader before, dead, no
		// node) is a death; old (dead, its node listed) is not.
		{machines: ms("m1"), dead: ms("surge", "old"), nodes: ns("m1", "old"),
			deaths: []crashDeath{{Machine: "surge", ConfigSHA: "b", Unseen: true, InARow: 1, Wait: time.Second}}},
		// Not counted twice (its dir not cleared yet); old's node removed:
		// it joined, so its death is not one before joining.
		{machines: ms("m1"), dead: ms("surge", "old"), nodes: ns("m1")},
		// Both cleared. m2 is listed, joins, dies, its node removed.
		{machines: ms("m1", "m2"), nodes: ns("m1")},
		{machines: ms("m1", "m2"), nodes: ns("m1", "m2")},
		{machines: ms("m1"), dead: ms("m2"), nodes: ns("m1", "m2")},
		{machines: ms("m1"), dead: ms("m2"), nodes: ns("m1")},
		// m3 made by this leader, dead before its look: observe counts
		// it (the first since m2 joined), foundDead does not again.
		{machines: ms("m1"), dead: ms("m3"), nodes: ns("m1"), made: []string{"m3"},
			deaths: []crashDeath{{Machine: "m3", ConfigSHA: "b", InARow: 1, Wait: time.Second}}},
		{machines: ms("m1"), dead: ms("m3"), nodes: ns("m1")},
	} {
		for _, id := range l.made {
			b.made("g", id, "b")
		}
		now := t0.Add(time.Duration(i) * time.Second)
		got := b.observe("g", "b", l.machines, l.nodes, now)
		got = append(got, b.foundDead("g", l.dead, l.nodes, now)...)
		if diff := cmp.Diff(l.deaths, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("look %d: deaths (-want +got):\n%s", i, diff)
		}
	}
	d := crashDeath{Machine: "surge", ConfigSHA: "b", Unseen: true, InARow: 1, Wait: time.Second}
	if !d.failsRollout(decide.GroupSnapshot{Rolling: true, TargetSHA: "b"}) {
		t.Error("a surge machine of the rollout found dead does not fail it")
	}
	if r := d.reason("g", ""); !strings.Contains(r, "made by an earlier leader") || !strings.Contains(r, "surge") {
		t.Errorf("reason %q does not say an earlier leader made surge", r)
	}
}

// TestCrashBackoffLeave: a machine whose node joined and then left the
// cluster (agent leave, node rm) before the machine went is no death
// before joining: it is reported as left, holds nothing back and counts
// toward no backoff. And a rollout's failed machine's reason promises no
// next machine, which the rollout does not make.
func TestCrashBackoffLeave(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(ids ...string) []decide.GroupMachine {
		var out []decide.GroupMachine
		for _, id := range ids {
			out = append(out, decide.GroupMachine{ID: id, ConfigSHA: "a"})
		}
		return out
	}
	ns := func(instances ...string) []decide.GroupNode {
		var out []decide.GroupNode
		for _, id := range instances {
			out = append(out, decide.GroupNode{ID: "node-" + id, InstanceID: id})
		}
		return out
	}
	var b crashBackoff
	for i, l := range []struct {
		machines []decide.GroupMachine
		nodes    []decide.GroupNode
		made     string
		deaths   []crashDeath
	}{
		{machines: ms("m1", "m2"), nodes: ns("m1", "m2")},
		// m2's node leaves; its machine still runs a moment.
		{machines: ms("m1", "m2"), nodes: ns("m1")},
		// Then it exits: left, not dead before joining.
		{machines: ms("m1"), nodes: ns("m1"), deaths: []crashDeath{{Machine: "m2", ConfigSHA: "a", Left: true}}},
		// m4 joins, then goes with its node between two looks: left.
		{machines: ms("m1", "m4"), nodes: ns("m1", "m4")},
		{machines: ms("m1"), nodes: ns("m1"), deaths: []crashDeath{{Machine: "m4", ConfigSHA: "a", Left: true}}},
		// m5 joins, and goes as a node (its record stays): no leave, and
		// no death before joining.
		{machines: ms("m1", "m5"), nodes: ns("m1", "m5")},
		{machines: ms("m1"), nodes: ns("m1", "m5")},
		{machines: ms("m1"), nodes: ns("m1")},
		// A machine made that dies unjoined is the first in a row.
		{machines: ms("m1"), nodes: ns("m1"), made: "m3", deaths: []crashDeath{{Machine: "m3", ConfigSHA: "a", InARow: 1, Wait: time.Second}}},
	} {
		if l.made != "" {
			b.made("g", l.made, "a")
		}
		now := t0.Add(time.Duration(i) * 10 * time.Second)
		got := b.observe("g", "a", l.machines, l.nodes, now)
		if diff := cmp.Diff(l.deaths, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("look %d: deaths (-want +got):\n%s", i, diff)
		}
		if i == 2 {
			if h := b.hold("g", decide.GroupProvision, now); h != 0 {
				t.Errorf("after a leave, provisions wait %v", h)
			}
		}
	}

	left := crashDeath{Machine: "m2", ConfigSHA: "b", Left: true}
	if left.failsRollout(decide.GroupSnapshot{Rolling: true, TargetSHA: "b"}) {
		t.Error("a machine whose node left fails the rollout")
	}
	if r := left.reason("g", ""); !strings.Contains(r, "after its node left the cluster") || strings.Contains(r, "before its node joined") {
		t.Errorf("a leave's reason %q", r)
	}
	failed := crashDeath{Machine: "m4", ConfigSHA: "b", InARow: 1, Wait: time.Second, FailsRollout: true}
	if r := failed.reason("g", ""); strings.Contains(r, "the next is made") || !strings.Contains(r, "a failed machine of the rollout") {
		t.Errorf("a rollout's failed machine's reason %q promises a next one", r)
	}
}
