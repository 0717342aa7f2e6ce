package main

import (
	"bytes"
	"context"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/client"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// fakeManagement is a Management server for testing the operator commands'
// plumbing and rendering. It records the calls it gets, and the requests of
// the calls that change something. Its changes are a sketch of the real
// server's: enough to render, not its guards.
type fakeManagement struct {
	pb.UnimplementedManagementServer

	// Set these before the fake serves; they are guarded by mu after.
	nodes []*pb.NodeView
	info  *pb.ClusterInfo
	// refuse makes the calls that change a node fail with this error when
	// they name it so (as the command line gave it).
	refuse map[string]error
	// settleAfter is how many GetNode calls of a node a promotion (the
	// learner catching up) or a handed-over demotion (the next leader
	// finishing it) takes to finish; 0 never finishes.
	settleAfter int
	// electionGets is how many GetNode calls fail with Unavailable, as
	// during an election, before GetNode answers again.
	electionGets int

	mu       sync.Mutex
	calls    []string
	requests []proto.Message
	tokens   map[string]string
	// settling counts down the GetNode calls until a node settles.
	settling map[string]int
}

// lock locks f and records call; defer the unlock it returns.
func (f *fakeManagement) lock(call string) (unlock func()) {
	f.mu.Lock()
	f.calls = append(f.calls, call)
	return f.mu.Unlock
}

// Calls returns the calls made so far, without the GetClusterInfo the
// client makes to refresh its manager cache.
func (f *fakeManagement) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(f.calls), func(c string) bool { return c == "GetClusterInfo" })
}

// Requests returns the requests of the calls that changed something.
func (f *fakeManagement) Requests() []proto.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

// change locks f and records a call that changes something, with its
// request; defer the unlock it returns.
func (f *fakeManagement) change(call string, req proto.Message) (unlock func()) {
	unlock = f.lock(call)
	f.requests = append(f.requests, proto.Clone(req))
	return unlock
}

// nodeRequest is the request of a call that names a node.
type nodeRequest interface {
	proto.Message
	GetId() string
}

// changeNode records a call that changes the node req names ("call id"),
// then, unless f refuses it, finds the node and answers with what fn makes
// of it; fn runs with f.mu held and may change the node.
func changeNode[T any](f *fakeManagement, call string, req nodeRequest, fn func(*pb.NodeView) (T, error)) (T, error) {
	defer f.change(call+" "+req.GetId(), req)()
	var zero T
	if err := f.refuse[req.GetId()]; err != nil {
		return zero, err
	}
	v, err := f.resolve(req.GetId())
	if err != nil {
		return zero, err
	}
	return fn(v)
}

func (f *fakeManagement) ListNodes(context.Context, *pb.ListNodesRequest) (*pb.ListNodesResponse, error) {
	defer f.lock("ListNodes")()
	resp := &pb.ListNodesResponse{}
	for _, v := range f.nodes {
		resp.Nodes = append(resp.Nodes, proto.CloneOf(v))
	}
	return resp, nil
}

// resolve finds id as the server does: an exact ID, a unique prefix or a
// name. Call with f.mu held; the view it returns is f's own.
func (f *fakeManagement) resolve(id string) (*pb.NodeView, error) {
	var match []*pb.NodeView
	for _, v := range f.nodes {
		if v.GetNode().GetId() == id || v.GetNode().GetName() == id {
			return v, nil
		}
		if strings.HasPrefix(v.GetNode().GetId(), id) {
			match = append(match, v)
		}
	}
	if len(match) != 1 {
		return nil, status.Errorf(codes.NotFound, "no node has the ID, unique ID prefix or name %q", id)
	}
	return match[0], nil
}

// GetNode returns the node, first finishing a promotion or a demotion that
// has waited long enough (see settleAfter).
func (f *fakeManagement) GetNode(_ context.Context, req *pb.GetNodeRequest) (*pb.NodeView, error) {
	defer f.lock("GetNode " + req.GetId())()
	if f.electionGets > 0 {
		f.electionGets--
		return nil, status.Error(codes.Unavailable, "no curator leader is elected right now: retry in a few seconds")
	}
	v, err := f.resolve(req.GetId())
	if err != nil {
		return nil, err
	}
	id := v.GetNode().GetId()
	if left, ok := f.settling[id]; ok && left > 0 {
		f.settling[id] = left - 1
		if left == 1 {
			delete(f.settling, id)
			if v.Node.Demoting {
				v.Node.Demoting = false
				dropConsensusRole(v)
			} else {
				v.ManagerStatus = pb.ManagerStatus_MANAGER_STATUS_REACHABLE
			}
		}
	}
	return proto.CloneOf(v), nil
}

func (f *fakeManagement) settle(id string) {
	if f.settling == nil {
		f.settling = map[string]int{}
	}
	f.settling[id] = f.settleAfter
}

func hasConsensusRole(v *pb.NodeView) bool {
	return slices.Contains(v.GetNode().GetRoles(), pb.Role_ROLE_CONSENSUS)
}

func dropConsensusRole(v *pb.NodeView) {
	v.Node.Roles = slices.DeleteFunc(v.Node.Roles, func(r pb.Role) bool { return r == pb.Role_ROLE_CONSENSUS })
	v.ManagerStatus = pb.ManagerStatus_MANAGER_STATUS_NONE
}

// PromoteNode makes the node a learner, which settles as a voter.
func (f *fakeManagement) PromoteNode(_ context.Context, req *pb.NodeRequest) (*pb.NodeView, error) {
	return changeNode(f, "PromoteNode", req, func(v *pb.NodeView) (*pb.NodeView, error) {
		if !hasConsensusRole(v) {
			v.Node.Roles = append([]pb.Role{pb.Role_ROLE_CONSENSUS}, v.Node.Roles...)
			v.ManagerStatus = pb.ManagerStatus_MANAGER_STATUS_LEARNER
			f.settle(v.Node.Id)
		}
		return proto.CloneOf(v), nil
	})
}

// DemoteNode demotes the node at once, or hands over if it is the leader:
// then the demotion settles.
func (f *fakeManagement) DemoteNode(_ context.Context, req *pb.NodeRequest) (*pb.DemoteResponse, error) {
	return changeNode(f, "DemoteNode", req, func(v *pb.NodeView) (*pb.DemoteResponse, error) {
		outcome := "demoted"
		switch {
		case v.Node.State == pb.NodeState_NODE_STATE_PENDING:
			return nil, status.Errorf(codes.FailedPrecondition, "refused: node %s is pending approval and holds no role: there is nothing to demote; approve it with `curator node approve %s`, or refuse it with `curator node rm %s`", v.Node.Id, v.Node.Id, v.Node.Id)
		case !hasConsensusRole(v):
			outcome = "not-a-manager"
		case v.ManagerStatus == pb.ManagerStatus_MANAGER_STATUS_LEADER:
			v.Node.Demoting = true
			f.settle(v.Node.Id)
			outcome = "handed-over"
		default:
			dropConsensusRole(v)
		}
		return &pb.DemoteResponse{Node: proto.CloneOf(v), Outcome: outcome}, nil
	})
}

func (f *fakeManagement) UpdateNode(_ context.Context, req *pb.UpdateNodeRequest) (*pb.NodeView, error) {
	return changeNode(f, "UpdateNode", req, func(v *pb.NodeView) (*pb.NodeView, error) {
		if req.GetAvailability() != pb.Availability_AVAILABILITY_UNSPECIFIED {
			v.Node.Availability = req.GetAvailability()
		}
		if v.Node.Labels == nil {
			v.Node.Labels = map[string]string{}
		}
		maps.Copy(v.Node.Labels, req.GetLabelAdd())
		for _, k := range req.GetLabelRm() {
			delete(v.Node.Labels, k)
		}
		return proto.CloneOf(v), nil
	})
}

func (f *fakeManagement) ApproveNode(_ context.Context, req *pb.NodeRequest) (*pb.NodeView, error) {
	return changeNode(f, "ApproveNode", req, func(v *pb.NodeView) (*pb.NodeView, error) {
		if v.Node.State != pb.NodeState_NODE_STATE_PENDING {
			return nil, status.Errorf(codes.AlreadyExists, "already exists: node %s is up, not pending: it was approved already, or never waited for approval; nothing changed", v.Node.Id)
		}
		v.Node.State = pb.NodeState_NODE_STATE_UP
		return proto.CloneOf(v), nil
	})
}

// RemoveNode refuses a ready node without force, as the server does.
func (f *fakeManagement) RemoveNode(_ context.Context, req *pb.RemoveNodeRequest) (*pb.RemoveNodeResponse, error) {
	return changeNode(f, "RemoveNode", req, func(v *pb.NodeView) (*pb.RemoveNodeResponse, error) {
		id := v.Node.Id
		if !req.GetForce() && v.Node.Status == pb.NodeStatus_NODE_STATUS_READY {
			return nil, status.Errorf(codes.FailedPrecondition, "refused: node %s is ready: run `curator agent leave` on it, or stop it first; `--force` removes it anyway", id)
		}
		f.nodes = slices.DeleteFunc(f.nodes, func(v *pb.NodeView) bool { return v.Node.Id == id })
		return &pb.RemoveNodeResponse{Id: id}, nil
	})
}

// UpdateCluster checks max voters as the server does.
func (f *fakeManagement) UpdateCluster(_ context.Context, req *pb.UpdateClusterRequest) (*pb.ClusterInfo, error) {
	defer f.change("UpdateCluster", req)()
	if req.MaxVoters != nil && (*req.MaxVoters < 1 || *req.MaxVoters > 7) {
		return nil, status.Errorf(codes.InvalidArgument, "invalid request: max voters %d: the limit is 7", *req.MaxVoters)
	}
	if req.RequireApproval != nil {
		f.info.RequireApproval = *req.RequireApproval
	}
	if req.MaxVoters != nil {
		f.info.MaxVoters = *req.MaxVoters
	}
	return proto.CloneOf(f.info), nil
}

func (f *fakeManagement) GetClusterInfo(context.Context, *pb.ClusterInfoRequest) (*pb.ClusterInfo, error) {
	defer f.lock("GetClusterInfo")()
	return proto.CloneOf(f.info), nil
}

func (f *fakeManagement) GetToken(_ context.Context, req *pb.GetTokenRequest) (*pb.TokenResponse, error) {
	defer f.lock("GetToken " + req.GetRole())()
	return f.token(req.GetRole(), "")
}

func (f *fakeManagement) RotateToken(_ context.Context, req *pb.RotateTokenRequest) (*pb.TokenResponse, error) {
	defer f.lock("RotateToken " + req.GetRole())()
	return f.token(req.GetRole(), "rotated"+req.GetRole())
}

// token answers with role's token, replaced first by one with the secret
// newSecret unless that is "". Call with f.mu held.
func (f *fakeManagement) token(role, newSecret string) (*pb.TokenResponse, error) {
	if _, ok := f.tokens[role]; !ok {
		return nil, status.Errorf(codes.InvalidArgument, "role %q is not worker or manager", role)
	}
	if newSecret != "" {
		f.tokens[role] = testToken(newSecret)
	}
	return &pb.TokenResponse{Token: f.tokens[role]}, nil
}

// testToken is a join token with secret.
func testToken(secret string) string { return "CUR1-" + strings.Repeat("f", 64) + "-" + secret }

var testTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// newFakeManagement returns a fake with three nodes (out of order, to check
// the sorting), a healthy cluster and a token per role.
func newFakeManagement() *fakeManagement {
	ts := timestamppb.New
	return &fakeManagement{
		nodes: []*pb.NodeView{
			{
				Node: &pb.Node{
					Id: "cccccccccccccccccccccccc", Name: "worker-1", Address: "127.0.100.12:7000",
					State: pb.NodeState_NODE_STATE_PENDING, Roles: []pb.Role{pb.Role_ROLE_WORKER},
					Availability: pb.Availability_AVAILABILITY_ACTIVE, Status: pb.NodeStatus_NODE_STATUS_UNKNOWN,
					Created: ts(testTime), Updated: ts(testTime), JoinedAs: "worker",
				},
			},
			{
				Node: &pb.Node{
					Id: "aaaaaaaaaaaaaaaaaaaaaaaa", Name: "manager-1", Address: "127.0.100.10:7000",
					State: pb.NodeState_NODE_STATE_UP, Roles: []pb.Role{pb.Role_ROLE_CONSENSUS, pb.Role_ROLE_WORKER},
					Availability: pb.Availability_AVAILABILITY_ACTIVE, Status: pb.NodeStatus_NODE_STATUS_READY,
					Labels: map[string]string{"zone": "a"}, Group: "managers", InstanceId: "i-1",
					ConfigSha: "5ha", Version: "v0.1.0", JoinedAs: "manager",
					Created: ts(testTime), Updated: ts(testTime.Add(time.Minute)), StatusChanged: ts(testTime.Add(time.Second)),
				},
				ManagerStatus: pb.ManagerStatus_MANAGER_STATUS_LEADER,
				LastHeartbeat: ts(testTime.Add(2*time.Minute + 500*time.Millisecond)),
			},
			{
				Node: &pb.Node{
					Id: "bbbbbbbbbbbbbbbbbbbbbbbb", Name: "manager-2", Address: "127.0.100.11:7000",
					State: pb.NodeState_NODE_STATE_UP, Roles: []pb.Role{pb.Role_ROLE_CONSENSUS},
					Availability: pb.Availability_AVAILABILITY_DRAIN, Status: pb.NodeStatus_NODE_STATUS_DOWN,
					Version: "v0.1.0",
				},
				ManagerStatus: pb.ManagerStatus_MANAGER_STATUS_UNREACHABLE,
			},
		},
		info: &pb.ClusterInfo{
			ClusterId: "c1", Leader: "aaaaaaaaaaaaaaaaaaaaaaaa",
			Voters:     []string{"aaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbb"},
			EtcdLeader: "bbbbbbbbbbbbbbbbbbbbbbbb", QuorumHealthy: true, MaxVoters: 7,
			Managers: []string{"127.0.100.10:7000", "127.0.100.11:7000"}, Version: "v0.1.0",
		},
		tokens: map[string]string{
			"worker":  testToken("workersecret"),
			"manager": testToken("managersecret"),
		},
	}
}

// startFakeCluster serves f over mutual TLS on a loopback port and writes an
// admin client config for it; it returns the config's path.
func startFakeCluster(t *testing.T, f *fakeManagement) string {
	t.Helper()
	ca, err := pki.NewCA("test cluster")
	if err != nil {
		t.Fatal(err)
	}
	serverKey, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	serverCert, err := ca.Issue(pki.CertRequest{
		PublicKey: serverKey.Public(), NodeID: "aaaaaaaaaaaaaaaaaaaaaaaa", Role: pki.RoleNode,
		IPs: []net.IP{lis.Addr().(*net.TCPAddr).IP},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.Creds(credentials.NewTLS(pki.ServerTLS(pki.TLSCertificate(serverCert, serverKey), ca.Cert))))
	pb.RegisterManagementServer(s, f)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(lis) // returns when stopped
	}()
	t.Cleanup(func() {
		s.Stop()
		<-done
	})

	adminKey, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	adminCert, err := ca.Issue(pki.CertRequest{PublicKey: adminKey.Public(), NodeID: "admin", Role: pki.RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	path, err := client.WriteAdminConfig(t.TempDir(), "c1", []string{lis.Addr().String()}, ca.Cert, adminCert, adminKey)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// runCLI runs the curator command line in-process and returns what it wrote
// to stdout.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	root := newRootCommand()
	var stdout, stderr bytes.Buffer
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	root.SetArgs(args)
	err := execute(ctx, root)
	return stdout.String(), err
}
