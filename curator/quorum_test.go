package curator

import (
	"strings"
	"testing"
)

func TestQuorumLost(t *testing.T) {
	m := func(name string, answers, self bool) quorumVoter {
		return quorumVoter{nodeID: "id-" + name, name: name, address: "127.0.0.1:7000", answers: answers, self: self}
	}
	for _, tc := range []struct {
		name   string
		voters []quorumVoter
		lost   bool
		want   []string
	}{
		{"3 of 3", []quorumVoter{m("a", true, true), m("b", true, false), m("c", true, false)}, false, nil},
		{"2 of 3", []quorumVoter{m("a", true, true), m("b", true, false), m("c", false, false)}, false, nil},
		{"1 of 3", []quorumVoter{m("c", false, false), m("a", true, true), m("b", false, false)}, true, []string{
			"1 of its 3 voters answer, and a majority needs 2",
			"Answering: a (127.0.0.1:7000, this manager).",
			"Not answering (stopped, or cut off from this manager): b (127.0.0.1:7000), c (127.0.0.1:7000).",
			"restart the stopped managers; if they are gone for good, stop the agent of one surviving manager and restart it with `curator agent run --data-dir DIR --force-new-cluster`, then join new managers (or restore a backup: `curator agent restore`)",
		}},
		{"2 of 4", []quorumVoter{m("a", true, true), m("b", true, false), m("c", false, false), m("d", false, false)}, true, []string{
			"2 of its 4 voters answer, and a majority needs 3",
		}},
		{"3 of 5", []quorumVoter{m("a", true, true), m("b", true, false), m("c", true, false), m("d", false, false), m("e", false, false)}, false, nil},
		{"a member with no record", []quorumVoter{m("a", true, true), {nodeID: "id-x"}, {}}, true, []string{
			"Not answering (stopped, or cut off from this manager): an unnamed member, id-x.",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lost, msg := quorumLost(tc.voters)
			if lost != tc.lost {
				t.Fatalf("quorumLost = %v (%q), want %v", lost, msg, tc.lost)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q does not say %q", msg, w)
				}
			}
		})
	}
}

func TestAddressFromPeerURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://127.0.0.2:7001": "127.0.0.2:7000",
		"https://[::1]:7001":     "[::1]:7000",
		"garbage":                "",
	} {
		if got := addressFromPeerURL(in); got != want {
			t.Errorf("addressFromPeerURL(%q) = %q, want %q", in, got, want)
		}
	}
}
