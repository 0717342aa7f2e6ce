package decide

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	pb "github.com/curatorproject/curator/proto"
)

// domainGroup is a group w of size 3 over domains a, b, c, machine i of
// domain i with node Ni, all ready; max_unhealthy 1, domain_hold 15m.
func domainGroup(now time.Time, domains ...string) GroupSnapshot {
	s := GroupSnapshot{Name: "w", Size: len(domains), ReplaceAfter: time.Minute, JoinTimeout: 3 * time.Minute, Voters: 3, HealthyVoters: 3, Now: now,
		MaxUnhealthy: 1, MaxUnhealthySpec: "1", MaxReplacements: 10, ReplacementWindow: 10 * time.Minute,
		Domains: []string{"a", "b", "c"}, DomainHold: 15 * time.Minute}
	for _, d := range domains {
		id := "m" + d + string(rune('0'+len(s.Machines)))
		s.Machines = append(s.Machines, GroupMachine{ID: id, Created: now.Add(-time.Hour), Domain: d})
		s.Nodes = append(s.Nodes, GroupNode{ID: "N" + id, InstanceID: id, Domain: d, Status: pb.NodeStatus_NODE_STATUS_READY, Since: now.Add(-time.Hour)})
	}
	return s
}

func TestPlace(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		s    func() GroupSnapshot
		want string
		ok   bool
	}{
		{"no domains", func() GroupSnapshot { s := domainGroup(now); s.Domains = nil; return s }, "", true},
		{"empty: the first", func() GroupSnapshot { return domainGroup(now) }, "a", true},
		{"the fewest", func() GroupSnapshot { return domainGroup(now, "a", "a", "c") }, "b", true},
		{"ties in the spec's order", func() GroupSnapshot { s := domainGroup(now, "b"); s.Domains = []string{"c", "b", "a"}; return s }, "c", true},
		{"ties: fewest managers of the cluster", func() GroupSnapshot {
			s := domainGroup(now, "a")
			s.ConsensusByDomain = map[string]int{"b": 1}
			return s
		}, "c", true},
		{"a ready node whose machine is gone counts", func() GroupSnapshot {
			s := domainGroup(now, "a", "b")
			s.Machines = s.Machines[:1]
			return s
		}, "c", true},
		{"never a dark domain", func() GroupSnapshot {
			s := domainGroup(now, "a")
			s.Dark = map[string]string{"b": "x", "c": "y"}
			return s
		}, "a", true},
		{"every domain dark", func() GroupSnapshot {
			s := domainGroup(now)
			s.Dark = map[string]string{"a": "x", "b": "x", "c": "x"}
			return s
		}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Place(tc.s())
			if got != tc.want || ok != tc.ok {
				t.Errorf("Place = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestDomainsSpread(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	// Growing from nothing spreads one per domain, then round again.
	s := domainGroup(now)
	s.Size = 4
	var got []string
	for range 4 {
		a := Group(s)
		if a == nil || a.Kind != GroupProvision {
			t.Fatalf("after %v: %+v, want a provision", got, a)
		}
		got = append(got, a.Domain)
		id := "new" + string(rune('0'+len(got)))
		s.Machines = append(s.Machines, GroupMachine{ID: id, Created: now, Domain: a.Domain})
		s.Nodes = append(s.Nodes, GroupNode{ID: "N" + id, InstanceID: id, Domain: a.Domain, Status: pb.NodeStatus_NODE_STATUS_READY, Since: now})
	}
	if d := cmp.Diff([]string{"a", "b", "c", "a"}, got); d != "" {
		t.Errorf("domains of the new machines (-want +got):\n%s", d)
	}
	// Scaling down takes from the domain with the most, and first from
	// a domain the spec no longer names.
	s = domainGroup(now, "a", "b", "b", "c")
	s.Size = 3
	if a := Group(s); a == nil || a.Kind != GroupDestroyMachine || !strings.HasPrefix(a.Machine, "mb") {
		t.Errorf("scale-down of a, b, b, c: %+v, want a machine of b", a)
	}
	s = domainGroup(now, "a", "b", "b", "z")
	s.Size = 3
	if a := Group(s); a == nil || a.Kind != GroupDestroyMachine || a.Machine != "mz3" {
		t.Errorf("scale-down of a, b, b, z: %+v, want the machine of z, a domain the spec does not name", a)
	}
	// A node records the domain its machine is listed in.
	s = domainGroup(now, "a", "b", "c")
	s.Nodes[1].Domain = ""
	if a := Group(s); a == nil || a.Kind != GroupSetDomain || a.Node != "Nmb1" || a.Domain != "b" {
		t.Errorf("a node without its domain: %+v, want set-domain b", a)
	}
}

// TestDarkDomainHeld: domain b of a group of three over a, b, c goes dark
// two ways (its engine unreachable: its machine unlisted; or its nodes all
// down), for longer than replace_after. The group holds, says so once
// naming b, makes nothing in b's stead and destroys nothing of b; the
// other domains' repairs go on; back, the hold lifts and nothing is made;
// dark past domain_hold, b is given up.
func TestDarkDomainHeld(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const down = pb.NodeStatus_NODE_STATUS_DOWN
	unreachable := func() GroupSnapshot {
		s := domainGroup(now, "a", "b", "c")
		s.Machines = []GroupMachine{s.Machines[0], s.Machines[2]} // b's engine does not answer
		s.Nodes[1].Status, s.Nodes[1].Since = down, now.Add(-10*time.Minute)
		s.Dark = map[string]string{"b": "its provider cannot list it"}
		s.DarkSince = map[string]time.Time{"b": now.Add(-10 * time.Minute)}
		s.Unlisted = map[string]bool{"b": true}
		return s
	}
	allDown := func() GroupSnapshot {
		s := domainGroup(now, "a", "b", "c")
		s.Nodes[1].Status, s.Nodes[1].Since = down, now.Add(-10*time.Minute)
		s.Dark = map[string]string{"b": "its 2 nodes are all down or unheard at once"}
		s.DarkSince = map[string]time.Time{"b": now.Add(-10 * time.Minute)}
		return s
	}
	for _, tc := range []struct {
		name     string
		s        func() GroupSnapshot
		kind     GroupActionKind
		contains string
	}{
		{"unreachable: the hold, naming the domain", unreachable, GroupRepairHold, "domain b is dark (its provider cannot list it; 1 of the group's nodes in it"},
		{"unreachable, held: nothing made, nothing removed", func() GroupSnapshot { s := unreachable(); s.RepairHeld = "held"; return s }, 0, ""},
		{"unreachable: without the hold, the record of a gone machine goes", func() GroupSnapshot { s := unreachable(); s.Dark = nil; return s }, GroupRemoveNode, "its machine mb1 is gone"},
		{"all down: the hold", allDown, GroupRepairHold, "node Nmb1 has been down for 10m0s"},
		{"all down, held: its machine is not destroyed", func() GroupSnapshot { s := allDown(); s.RepairHeld = "held"; return s }, GroupWait, "domain b is dark"},
		{"all down: without the hold, replaced", func() GroupSnapshot { s := allDown(); s.Dark = nil; return s }, GroupDestroyMachine, "replacing its machine"},
		{"another domain's repair goes on", func() GroupSnapshot {
			s := allDown()
			s.RepairHeld, s.MaxUnhealthy = "held", 2
			s.Nodes[0].Status, s.Nodes[0].Since = down, now.Add(-10*time.Minute)
			return s
		}, GroupDestroyMachine, "node Nma0 has been down"},
		{"back: the hold lifts, nothing made", func() GroupSnapshot {
			s := domainGroup(now, "a", "b", "c")
			s.RepairHeld = "held"
			return s
		}, GroupRepairResume, "the repairs of group w go on"},
		{"dark past domain_hold: given up", func() GroupSnapshot {
			s := unreachable()
			s.RepairHeld, s.DarkSince["b"] = "held", now.Add(-16*time.Minute)
			return s
		}, GroupRepairResume, "b dark for domain_hold 15m0s or longer: given up"},
		{"given up: its record goes, and a machine is made elsewhere", func() GroupSnapshot {
			s := unreachable()
			s.DarkSince["b"] = now.Add(-16 * time.Minute)
			return s
		}, GroupRemoveNode, "its machine mb1 is gone"},
		{"all down, listed: a machine it does not list is gone", func() GroupSnapshot {
			s := allDown()
			s.RepairHeld = "held"
			s.Machines = []GroupMachine{s.Machines[0], s.Machines[2]}
			s.Nodes[1].Drained = true
			return s
		}, GroupRemoveNode, "its machine mb1 is gone"},
		{"a domain the group no longer names is not held", func() GroupSnapshot {
			s := unreachable()
			s.Domains = []string{"a", "c"}
			return s
		}, GroupRemoveNode, "its machine mb1 is gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := Group(tc.s())
			if tc.kind == 0 {
				if a != nil {
					t.Fatalf("Group = %+v, want nothing", a)
				}
				return
			}
			if a == nil || a.Kind != tc.kind || !strings.Contains(a.Reason, tc.contains) {
				t.Fatalf("Group = %+v, want %v with %q", a, tc.kind, tc.contains)
			}
		})
	}
	// Given up, the replacement goes to a domain that is not dark.
	s := unreachable()
	s.DarkSince["b"] = now.Add(-16 * time.Minute)
	s.Nodes = []GroupNode{s.Nodes[0], s.Nodes[2]}
	if a := Group(s); a == nil || a.Kind != GroupProvision || a.Domain != "a" {
		t.Errorf("given up, its node gone: %+v, want a provision in a", a)
	}
}

func TestDarkDomains(t *testing.T) {
	n := func(id, d string, healthy bool) DomainNode { return DomainNode{ID: id, Domain: d, Healthy: healthy} }
	for _, tc := range []struct {
		name  string
		nodes []DomainNode
		want  []string
	}{
		{"all well", []DomainNode{n("1", "a", true), n("2", "a", true), n("3", "b", true), n("4", "b", true)}, nil},
		{"b all down", []DomainNode{n("1", "a", true), n("2", "a", true), n("3", "b", false), n("4", "b", false)}, []string{"b"}},
		{"b half down", []DomainNode{n("1", "a", true), n("3", "b", true), n("4", "b", false)}, nil},
		{"a domain of one node is that node", []DomainNode{n("1", "a", true), n("3", "b", false)}, nil},
		{"everything down: no domain is the one", []DomainNode{n("1", "a", false), n("2", "a", false), n("3", "b", false), n("4", "b", false)}, nil},
		{"no domain is never dark", []DomainNode{n("1", "a", true), n("3", "", false), n("4", "", false)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for d := range DarkDomains(tc.nodes) {
				got = append(got, d)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("DarkDomains (-want +got):\n%s", d)
			}
		})
	}
}

func TestDomainsWarning(t *testing.T) {
	for _, tc := range []struct {
		name    string
		domains []string
		want    string
	}{
		{"no domains", []string{"", "", ""}, ""},
		{"3 in 3", []string{"a", "b", "c"}, ""},
		{"5 in 3", []string{"a", "a", "b", "b", "c"}, ""},
		{"3 in 2", []string{"a", "a", "b"}, "domain a holds 2 of the 3 voters: losing it loses the quorum"},
		{"5 with 3 in one", []string{"a", "a", "a", "b", "c"}, "domain a holds 3 of the 5 voters"},
		{"one without", []string{"a", "", ""}, "no domain holds 2 of the 3 voters"},
		{"1 voter", []string{"a"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := DomainsWarning(tc.domains)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("DomainsWarning(%v) = %q, want %q", tc.domains, got, tc.want)
			}
		})
	}
}
