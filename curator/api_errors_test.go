package curator

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
)

// huge is a 100 KB value, as an operator once sent.
var huge = strings.Repeat("x", 100<<10)

// TestRegisterRefusesBadNames: the leader refuses a bad name, a 100 KB
// one (without echoing it), and a name that is some node's ID, and
// creates nothing.
func TestRegisterRefusesBadNames(t *testing.T) {
	c := newTestCluster(t)
	c.startLeader()
	admin, anon := c.dialFirst()
	token := c.token(admin, "worker")
	w, _ := c.register(anon, token, "w1")
	nodes := func() []*pb.Node {
		t.Helper()
		ns, err := store.NodeList(callCtx(t), c.cli)
		if err != nil {
			t.Fatal(err)
		}
		return ns
	}
	before := nodes()
	key, ownID := newKey(t)
	for _, tc := range []struct {
		name, nodeName string
		code           codes.Code
		want           string
	}{
		{"newline", "fake\nrow", codes.InvalidArgument, `"fake\nrow"`},
		{"100 KB", huge, codes.InvalidArgument, "(102400 bytes)"},
		{"another node's ID", w.id, codes.InvalidArgument, "is the ID of node " + w.id},
		{"the first node's ID", c.first.id, codes.InvalidArgument, "is the ID of node"},
		{"its own ID", ownID, codes.InvalidArgument, "own ID"},
		{"taken", "w1", codes.AlreadyExists, "taken"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := registerKey(anon, key, token, tc.nodeName, freeAddress(t))
			if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.want) {
				t.Errorf("Register(name %s) = %v, want %v saying %q", spec.QuoteShort(tc.nodeName), err, tc.code, tc.want)
			}
			if n := len(status.Convert(err).Message()); n > 400 {
				t.Errorf("a %d-byte error: it must not echo the name", n)
			}
			// The health loop may mark a node down meanwhile (the first
			// node sends no heartbeat here): that is not the refusal's.
			health := protocmp.IgnoreFields(&pb.Node{}, "status", "status_changed")
			if diff := cmp.Diff(before, nodes(), protocmp.Transform(), health); diff != "" {
				t.Errorf("a refused registration changed the nodes (-before +after):\n%s", diff)
			}
		})
	}
}

// TestRequestErrors: the management calls refuse bad input with a clear,
// short error that names no verb (the CLI says what it was doing), and
// change nothing.
func TestRequestErrors(t *testing.T) {
	c := newTestCluster(t)
	c.startLeader()
	admin, anon := c.dialFirst()
	mgmt := pb.NewManagementClient(admin)
	w, _ := c.register(anon, c.token(admin, "worker"), "w1")
	state := func() (*pb.ClusterState, []*pb.Node) {
		t.Helper()
		cs, err := store.ClusterLoad(callCtx(t), c.cli)
		if err != nil {
			t.Fatal(err)
		}
		ns, err := store.NodeList(callCtx(t), c.cli)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range ns {
			n.Status, n.StatusChanged = 0, nil // the health loop's
		}
		return cs, ns
	}
	for _, tc := range []struct {
		name string
		call func() error
		code codes.Code
		want string
	}{
		{"max voters 8", func() error {
			_, err := mgmt.UpdateCluster(callCtx(t), &pb.UpdateClusterRequest{MaxVoters: ptr(uint32(8))})
			return err
		}, codes.InvalidArgument, "max voters 8: the limit is 7"},
		{"max voters 0", func() error {
			_, err := mgmt.UpdateCluster(callCtx(t), &pb.UpdateClusterRequest{MaxVoters: ptr(uint32(0))})
			return err
		}, codes.InvalidArgument, "at least 1"},
		{"promote of an unknown node", func() error {
			_, err := mgmt.PromoteNode(callCtx(t), &pb.NodeRequest{Id: "nosuch"})
			return err
		}, codes.NotFound, `"nosuch"`},
		{"promote of an unknown 100 KB ID", func() error {
			_, err := mgmt.PromoteNode(callCtx(t), &pb.NodeRequest{Id: huge})
			return err
		}, codes.NotFound, "(102400 bytes)"},
		{"demote of the last voter", func() error {
			_, err := mgmt.DemoteNode(callCtx(t), &pb.NodeRequest{Id: c.first.id})
			return err
		}, codes.FailedPrecondition, "last etcd voter"},
		{"label value of 100 KB", func() error {
			_, err := mgmt.UpdateNode(callCtx(t), &pb.UpdateNodeRequest{Id: w.id, LabelAdd: map[string]string{"k": huge}})
			return err
		}, codes.InvalidArgument, "(102400 bytes)"},
		{"label key with a newline", func() error {
			_, err := mgmt.UpdateNode(callCtx(t), &pb.UpdateNodeRequest{Id: w.id, LabelAdd: map[string]string{"a\nb": "v"}})
			return err
		}, codes.InvalidArgument, `"a\nb"`},
		{"label key to remove of 100 KB", func() error {
			_, err := mgmt.UpdateNode(callCtx(t), &pb.UpdateNodeRequest{Id: w.id, LabelRm: []string{huge}})
			return err
		}, codes.InvalidArgument, "(102400 bytes)"},
		{"token role of 100 KB", func() error {
			_, err := mgmt.GetToken(callCtx(t), &pb.GetTokenRequest{Role: huge})
			return err
		}, codes.InvalidArgument, "(102400 bytes)"},
		{"rollout change for a SHA that is none", func() error {
			_, err := mgmt.ChangeRollout(callCtx(t), &pb.ChangeRolloutRequest{Group: "w", Action: "cancel", TargetSha: "abc\n"})
			return err
		}, codes.InvalidArgument, `target SHA "abc\n"`},
		{"group with an env name holding '='", func() error {
			_, err := mgmt.CommitGroup(callCtx(t), &pb.CommitGroupRequest{Spec: &pb.GroupSpec{Name: "w", Roles: []pb.Role{pb.Role_ROLE_WORKER},
				Provider: &pb.ProviderSpec{Kind: &pb.ProviderSpec_Process{Process: &pb.ProcessProviderSpec{Addresses: "127.0.0.1-127.0.0.2", Dir: "/x"}}},
				Template: &pb.InstanceTemplate{Env: map[string]string{"PATH=/tmp:": "x"}}}})
			return err
		}, codes.InvalidArgument, `environment variable "PATH=/tmp:"`},
		{"approve of an approved node", func() error {
			_, err := mgmt.ApproveNode(callCtx(t), &pb.NodeRequest{Id: w.id})
			return err
		}, codes.AlreadyExists, "approved already"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			csBefore, nodesBefore := state()
			err := tc.call()
			msg := status.Convert(err).Message()
			if status.Code(err) != tc.code || !strings.Contains(msg, tc.want) {
				t.Errorf("got %v, want %v saying %q", err, tc.code, tc.want)
			}
			for _, verb := range []string{"promote:", "demote:", "approve:", "update cluster:", "update node:"} {
				if strings.HasPrefix(msg, verb) {
					t.Errorf("error %q starts with %q: the caller says what it was doing", msg, verb)
				}
			}
			if len(msg) > 500 {
				t.Errorf("a %d-byte error: it must not echo what it refuses", len(msg))
			}
			csAfter, nodesAfter := state()
			if diff := cmp.Diff(csBefore, csAfter, protocmp.Transform()); diff != "" {
				t.Errorf("a refused call changed the cluster (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(nodesBefore, nodesAfter, protocmp.Transform()); diff != "" {
				t.Errorf("a refused call changed the nodes (-before +after):\n%s", diff)
			}
		})
	}

	t.Run("an even limit is accepted, with a warning", func(t *testing.T) {
		info, err := mgmt.UpdateCluster(callCtx(t), &pb.UpdateClusterRequest{MaxVoters: ptr(uint32(4))})
		if err != nil {
			t.Fatal(err)
		}
		if info.MaxVoters != 4 || !strings.Contains(strings.Join(info.Warnings, "\n"), "max voters is 4, an even number") {
			t.Errorf("max voters %d, warnings %q; want 4 and a warning about the even limit", info.MaxVoters, info.Warnings)
		}
	})
}
