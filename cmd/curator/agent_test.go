package main

import (
	"strings"
	"testing"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/node"
)

// TestAgentDoneWording: init says it initialised a cluster; restore says
// it restored one (how many records, from where, this node its only
// manager), never that it initialised one; both print the admin config and
// the join commands.
func TestAgentDoneWording(t *testing.T) {
	res := node.InitResult{NodeID: "n1", ClusterID: "c0ffee", AdminConfig: "/d/admin/config.yaml", WorkerToken: "wtok", ManagerToken: "mtok"}
	for _, tc := range []struct {
		name      string
		print     func(*strings.Builder)
		want, not []string
	}{
		{
			name: "init",
			print: func(b *strings.Builder) {
				printInitDone(b, "Initialised cluster c0ffee. This node is n1, listening on 10.0.0.1:7000.", &res, "10.0.0.1:7000", "curator")
			},
			want: []string{"Initialised cluster c0ffee", "Admin config: /d/admin/config.yaml", "--token mtok", "--token wtok"},
		},
		{
			name: "restore",
			print: func(b *strings.Builder) {
				printRestoreDone(b, &node.RestoreResult{InitResult: res, Nodes: 5}, "/backups/b.db", "10.0.0.1:7000", "curator")
			},
			want: []string{"Restored cluster c0ffee from /backups/b.db: 5 node records", "only manager", "old managers", "Admin config: /d/admin/config.yaml", "--token mtok", "--token wtok"},
			not:  []string{"Initialised"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			tc.print(&b)
			out := b.String()
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output does not say %q:\n%s", w, out)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(out, n) {
					t.Errorf("output says %q:\n%s", n, out)
				}
			}
		})
	}
}

// TestOperatorAgentFlagsAreJoinFlags: the agent join flags an operator
// may put in a group's args (spec.OperatorAgentFlags, which the leader
// reads as flag and value) are flags of `agent join` that take a value;
// a flag renamed or made a switch would let its neighbour through as its
// value, or be refused for a reason no one could see.
func TestOperatorAgentFlagsAreJoinFlags(t *testing.T) {
	join := newAgentJoinCommand()
	for _, name := range spec.OperatorAgentFlags {
		f := join.Flags().Lookup(name)
		switch {
		case f == nil:
			t.Errorf("--%s is not a flag of agent join", name)
		case f.NoOptDefVal != "" || f.Value.Type() == "bool":
			t.Errorf("--%s of agent join takes no value (%s)", name, f.Value.Type())
		}
	}
}
