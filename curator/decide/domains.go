package decide

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	pb "github.com/curatorproject/curator/proto"
)

// Failure domains: a group spreads its machines across the domains its
// spec names (GroupSnapshot.Domains: docker engines, zones), and a domain
// that goes dark is held as one.
//
//   - Placement: a new machine goes to the domain with the fewest of the
//     group's machines (ties: the fewest consensus members of the
//     cluster, then the spec's order), never to a dark one; a machine
//     taken away (scale-down, a rollout) is, among those equal by
//     removalRank, one of a domain the spec no longer names, else of the
//     domain with the most. A consensus group so spreads its members,
//     and losing one domain loses at most its share of the voters.
//   - Dark domains (GroupSnapshot.Dark): a domain whose provider cannot
//     list it (an engine that does not answer: its machines are unknown,
//     not gone), or whose every node, two or more, is down or unheard at
//     once while another domain's are not (DarkDomains). A domain of one
//     node is that node: the repair ceiling judges it.
//   - The hold: while a domain holding machines of the group is dark, the
//     group's repairs are held (its record's repair hold, an event that
//     names the domain): no machine of it is destroyed or replaced, and
//     when its provider could not list it, a node of it is neither
//     removed nor counted missing, so nothing is made in its stead (in
//     a domain it did list, a machine not listed is gone). The other
//     domains' repairs go on under the repair ceiling, which counts the
//     dark domain's machines as unhealthy. The hold ends by itself when
//     the domain comes back: its machines are listed, its nodes ready, and
//     the group is whole with nothing made twice. To give a domain up,
//     commit the group without it: its machines are then replaced in the
//     others.

// DomainNode is one node as DarkDomains sees it.
type DomainNode struct {
	ID, Domain string
	// Healthy: its record says ready and this leader hears it.
	Healthy bool
}

// DarkDomains returns the domains (by name, with why) whose nodes, two or
// more, are all unhealthy at once while another domain has a healthy
// node: a host, an engine or a zone gone dark, more likely than each of
// its machines failing on its own. Nodes of no domain ("") are never one.
func DarkDomains(nodes []DomainNode) map[string]string {
	total, healthy := map[string]int{}, map[string]int{}
	for _, n := range nodes {
		if n.Domain == "" {
			continue
		}
		total[n.Domain]++
		if n.Healthy {
			healthy[n.Domain]++
		}
	}
	dark := map[string]string{}
	for d, t := range total {
		if t < 2 || healthy[d] > 0 {
			continue
		}
		for other, h := range healthy {
			if other != d && h > 0 {
				dark[d] = fmt.Sprintf("its %d nodes are all down or unheard at once", t)
				break
			}
		}
	}
	return dark
}

// HeldDomains returns the dark domains whose machines of the group are
// held now, sorted.
func HeldDomains(s GroupSnapshot) []string { return darkHere(s) }

// darkHere returns the held dark domains holding a machine or a node of
// the group, sorted.
func darkHere(s GroupSnapshot) []string {
	var out []string
	for d := range s.Dark {
		if !heldDomain(s, d) {
			continue
		}
		if slices.ContainsFunc(s.Machines, func(m GroupMachine) bool { return m.Domain == d }) ||
			slices.ContainsFunc(s.Dead, func(m GroupMachine) bool { return m.Domain == d }) ||
			slices.ContainsFunc(s.Nodes, func(n GroupNode) bool { return n.Domain == d }) {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

// darkWords says which dark domains hold the group's machines, and why.
func darkWords(s GroupSnapshot, domains []string) string {
	parts := make([]string, len(domains))
	for i, d := range domains {
		n := 0
		for _, node := range s.Nodes {
			if node.Domain == d {
				n++
			}
		}
		parts[i] = fmt.Sprintf("domain %s is dark (%s; %d of the group's nodes in it; since %s)", d, s.Dark[d], n, s.DarkSince[d].UTC().Format(time.RFC3339))
	}
	return strings.Join(parts, "; ")
}

// darkHold is the reason of the hold of a group with machines in the
// dark domains.
func darkHold(s GroupSnapshot, domains []string) string {
	return fmt.Sprintf("group %s: %s: its machines there are held as one, none destroyed or replaced until the domain comes back, for domain_hold %v at most (commit the group without the domain to give it up now)",
		s.Name, darkWords(s, domains), s.DomainHold)
}

// actionDomain is the domain of the machine (or else the node) action a
// is about, "" if none.
func actionDomain(s GroupSnapshot, a *GroupAction) string {
	for _, ms := range [][]GroupMachine{s.Machines, s.Dead} {
		if i := slices.IndexFunc(ms, func(m GroupMachine) bool { return a.Machine != "" && m.ID == a.Machine }); i >= 0 {
			return ms[i].Domain
		}
	}
	if i := slices.IndexFunc(s.Nodes, func(n GroupNode) bool { return a.Node != "" && n.ID == a.Node }); i >= 0 {
		return s.Nodes[i].Domain
	}
	return ""
}

// unknownMachine says whether node n's machine is unknown rather than
// gone: it is not listed, and n's domain is held and was not listed (its
// provider could not reach it). In a domain the provider did list, a
// machine it did not list is gone (or dead: GroupSnapshot.Dead), as
// anywhere: a rollout or a scale-down that takes a domain's machines
// away on purpose is not held up by their nodes.
func unknownMachine(s GroupSnapshot, n GroupNode, listed bool) bool {
	return !listed && s.Unlisted[n.Domain] && heldDomain(s, n.Domain)
}

// heldDomain says whether domain d is held: one of the group's domains,
// dark, for less than domain_hold (GroupSnapshot.DomainHold; zero: no
// limit). A domain dark for longer is given up: its machines are
// replaced in the others.
func heldDomain(s GroupSnapshot, d string) bool {
	return d != "" && s.Dark[d] != "" && slices.Contains(s.Domains, d) &&
		(s.DomainHold <= 0 || s.Now.Sub(s.DarkSince[d]) < s.DomainHold)
}

// givenUp lists the group's domains dark for domain_hold or longer.
func givenUp(s GroupSnapshot) []string {
	var out []string
	for _, d := range s.Domains {
		if s.Dark[d] != "" && !heldDomain(s, d) {
			out = append(out, d)
		}
	}
	return out
}

// domainCounts counts the group's machines by domain: those listed, and
// the nodes counted for a machine not listed (a ready node's, one of a
// dark domain).
func domainCounts(s GroupSnapshot) map[string]int {
	counts := map[string]int{}
	listed := map[string]bool{}
	for _, m := range s.Machines {
		counts[m.Domain]++
		listed[m.ID] = true
	}
	for _, n := range s.Nodes {
		if !listed[n.InstanceID] && (n.Status == pb.NodeStatus_NODE_STATUS_READY || unknownMachine(s, n, false)) {
			counts[n.Domain]++
		}
	}
	return counts
}

// Place returns the domain a new machine of the group goes to (see the
// top), "" when the group names none; ok is false when every domain it
// names is dark.
func Place(s GroupSnapshot) (domain string, ok bool) {
	if len(s.Domains) == 0 {
		return "", true
	}
	counts := domainCounts(s)
	var best string
	found := false
	for _, d := range s.Domains {
		if s.Dark[d] != "" {
			continue
		}
		if !found || counts[d] < counts[best] || counts[d] == counts[best] && s.ConsensusByDomain[d] < s.ConsensusByDomain[best] {
			best, found = d, true
		}
	}
	return best, found
}

// pickVictim is the machine of ms to take away: the lowest removalRank, then
// one of a domain the spec does not name, then one of the domain with the
// most machines, then by ID.
func pickVictim(s GroupSnapshot, ms []GroupMachine, nodeOf map[string]GroupNode) GroupMachine {
	counts := domainCounts(s)
	weight := func(m GroupMachine) int {
		if len(s.Domains) > 0 && !slices.Contains(s.Domains, m.Domain) {
			return len(s.Machines) + len(s.Nodes) + 1
		}
		return counts[m.Domain]
	}
	return slices.MinFunc(ms, func(a, b GroupMachine) int {
		return cmp.Or(cmp.Compare(removalRank(s, a, nodeOf), removalRank(s, b, nodeOf)), cmp.Compare(weight(b), weight(a)), cmp.Compare(a.ID, b.ID))
	})
}

// DomainsWarning says how the consensus members (their domains, one per
// member, "" for none) fail to spread so that losing one domain keeps
// the quorum, "" when they do (or name no domains at all).
func DomainsWarning(voterDomains []string) string {
	counts := map[string]int{}
	named := false
	for _, d := range voterDomains {
		counts[d]++
		named = named || d != ""
	}
	if !named || len(voterDomains) < 3 {
		return "" // one or two voters lose the quorum with any one of them
	}
	v := len(voterDomains)
	most := slices.MaxFunc(slices.Sorted(maps.Keys(counts)), func(a, b string) int { return cmp.Compare(counts[a], counts[b]) })
	if counts[most] <= (v-1)/2 {
		return ""
	}
	name := "domain " + most
	if most == "" {
		name = "no domain"
	}
	return fmt.Sprintf("%s holds %d of the %d voters: losing it loses the quorum; spread the managers over more domains (at most %d in any one)", name, counts[most], v, (v-1)/2)
}
