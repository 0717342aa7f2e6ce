package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/client"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// fakeManagement is a Management server with fixed answers, for testing the
// operator commands' plumbing and rendering. It records the calls it gets.
type fakeManagement struct {
	pb.UnimplementedManagementServer

	nodes []*pb.NodeView
	info  *pb.ClusterInfo

	mu     sync.Mutex
	calls  []string
	tokens map[string]string
}

func (f *fakeManagement) record(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
}

// Calls returns the calls made so far, without the GetClusterInfo the
// client makes to refresh its manager cache.
func (f *fakeManagement) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if c != "GetClusterInfo" {
			out = append(out, c)
		}
	}
	return out
}

func (f *fakeManagement) ListNodes(context.Context, *pb.ListNodesRequest) (*pb.ListNodesResponse, error) {
	f.record("ListNodes")
	return &pb.ListNodesResponse{Nodes: f.nodes}, nil
}

// GetNode resolves id as the server does: an exact ID, a unique prefix or a
// name.
func (f *fakeManagement) GetNode(_ context.Context, req *pb.GetNodeRequest) (*pb.NodeView, error) {
	f.record("GetNode " + req.GetId())
	var match []*pb.NodeView
	for _, v := range f.nodes {
		if v.GetNode().GetId() == req.GetId() || v.GetNode().GetName() == req.GetId() {
			return v, nil
		}
		if strings.HasPrefix(v.GetNode().GetId(), req.GetId()) {
			match = append(match, v)
		}
	}
	if len(match) != 1 {
		return nil, status.Errorf(codes.NotFound, "no node has the ID, unique ID prefix or name %q", req.GetId())
	}
	return match[0], nil
}

func (f *fakeManagement) GetClusterInfo(context.Context, *pb.ClusterInfoRequest) (*pb.ClusterInfo, error) {
	f.record("GetClusterInfo")
	return f.info, nil
}

func (f *fakeManagement) GetToken(_ context.Context, req *pb.GetTokenRequest) (*pb.TokenResponse, error) {
	f.record("GetToken " + req.GetRole())
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.tokens[req.GetRole()]
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "role %q is not worker or manager", req.GetRole())
	}
	return &pb.TokenResponse{Token: t}, nil
}

func (f *fakeManagement) RotateToken(_ context.Context, req *pb.RotateTokenRequest) (*pb.TokenResponse, error) {
	f.record("RotateToken " + req.GetRole())
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.tokens[req.GetRole()]; !ok {
		return nil, status.Errorf(codes.InvalidArgument, "role %q is not worker or manager", req.GetRole())
	}
	f.tokens[req.GetRole()] = "CUR1-" + strings.Repeat("f", 64) + "-rotated" + req.GetRole()
	return &pb.TokenResponse{Token: f.tokens[req.GetRole()]}, nil
}

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
					Created: ts(testTime), Updated: ts(testTime),
				},
			},
			{
				Node: &pb.Node{
					Id: "aaaaaaaaaaaaaaaaaaaaaaaa", Name: "manager-1", Address: "127.0.100.10:7000",
					State: pb.NodeState_NODE_STATE_UP, Roles: []pb.Role{pb.Role_ROLE_CONSENSUS, pb.Role_ROLE_WORKER},
					Availability: pb.Availability_AVAILABILITY_ACTIVE, Status: pb.NodeStatus_NODE_STATUS_READY,
					Labels: map[string]string{"zone": "a"}, Group: "managers", InstanceId: "i-1",
					ConfigSha: "5ha", Version: "v0.1.0",
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
			"worker":  "CUR1-" + strings.Repeat("f", 64) + "-workersecret",
			"manager": "CUR1-" + strings.Repeat("f", 64) + "-managersecret",
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
	err := root.ExecuteContext(ctx)
	return stdout.String(), err
}
