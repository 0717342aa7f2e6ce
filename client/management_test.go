package client

import (
	"context"
	"errors"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/testing/protocmp"

	pb "github.com/curatorproject/curator/proto"
)

// recorder stands in for a manager: it answers every Management call with
// answer (after delay) and records the request. It implements no method
// itself: gRPC hands it every call as one to an unknown service, and the
// request's type comes from the service's descriptor, so it serves each
// method as the client sends it. GetClusterInfo, the client's cache
// refresh, is left unimplemented and unrecorded: the client shrugs that off.
type recorder struct {
	answer func(req proto.Message) (proto.Message, error)
	delay  time.Duration

	mu   sync.Mutex
	reqs []proto.Message
}

// scripted is a recorder whose call i of n is answered by answer(i), and
// every call after the last by answer(n-1).
func scripted(n int, answer func(i int) (proto.Message, error)) *recorder {
	var mu sync.Mutex
	calls := 0
	return &recorder{answer: func(proto.Message) (proto.Message, error) {
		mu.Lock()
		defer mu.Unlock()
		i := min(calls, n-1)
		calls++
		return answer(i)
	}}
}

func (r *recorder) handle(_ any, stream grpc.ServerStream) error {
	full, _ := grpc.MethodFromServerStream(stream)
	method := pb.File_curator_proto.Services().ByName("Management").Methods().ByName(protoreflect.Name(path.Base(full)))
	if method == nil || method.Name() == "GetClusterInfo" {
		return status.Errorf(codes.Unimplemented, "%s is not served", full)
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(method.Input().FullName())
	if err != nil {
		return err
	}
	req := mt.New().Interface()
	if err := stream.RecvMsg(req); err != nil {
		return err
	}
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	time.Sleep(r.delay)
	resp, err := r.answer(req)
	if err != nil {
		return err
	}
	return stream.SendMsg(resp)
}

func (r *recorder) requests() []proto.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]proto.Message(nil), r.reqs...)
}

// dialRecorder serves r as the one manager and dials it.
func dialRecorder(t *testing.T, r *recorder, opts ...Option) *Client {
	t.Helper()
	ca := newCA(t)
	lis := listen(t, "127.0.0.2")
	serve(t, lis, ca, ca, nil, grpc.UnknownServiceHandler(r.handle))
	return dial(t, writeConfig(t, ca, lis.Addr().String()), opts...)
}

func view(id string, ms pb.ManagerStatus, roles ...pb.Role) *pb.NodeView {
	return &pb.NodeView{Node: &pb.Node{Id: id, Roles: roles}, ManagerStatus: ms}
}

const testToken = "CUR1-ffff-secret"

// TestMethodsSendTheirRequests: each typed method sends the request its
// arguments say and returns what the cluster answered.
func TestMethodsSendTheirRequests(t *testing.T) {
	u32 := func(v uint32) *uint32 { return &v }
	yes := true
	node := view("n1", pb.ManagerStatus_MANAGER_STATUS_LEARNER, pb.Role_ROLE_CONSENSUS)
	events := &pb.ListEventsResponse{Events: []*pb.Event{{Loop: "health", Action: "mark-down"}}}
	for _, tc := range []struct {
		name   string
		answer proto.Message
		call   func(context.Context, *Client) (any, error)
		req    proto.Message
		// want is what call returns; nil: the answer itself.
		want any
	}{{
		name:   "promote",
		answer: node,
		call:   func(ctx context.Context, c *Client) (any, error) { return c.PromoteNode(ctx, "n") },
		req:    &pb.NodeRequest{Id: "n"},
	}, {
		name:   "demote",
		answer: &pb.DemoteResponse{Node: node, Outcome: DemoteHandedOver},
		call:   func(ctx context.Context, c *Client) (any, error) { return c.DemoteNode(ctx, "n1") },
		req:    &pb.NodeRequest{Id: "n1"},
	}, {
		name:   "update",
		answer: node,
		call: func(ctx context.Context, c *Client) (any, error) {
			return c.UpdateNode(ctx, "n1", NodeUpdate{
				Availability: pb.Availability_AVAILABILITY_DRAIN,
				LabelAdd:     map[string]string{"zone": "a", "empty": ""}, LabelRm: []string{"old"},
			})
		},
		req: &pb.UpdateNodeRequest{
			Id: "n1", Availability: pb.Availability_AVAILABILITY_DRAIN,
			LabelAdd: map[string]string{"zone": "a", "empty": ""}, LabelRm: []string{"old"},
		},
	}, {
		name:   "approve",
		answer: node,
		call:   func(ctx context.Context, c *Client) (any, error) { return c.ApproveNode(ctx, "n1") },
		req:    &pb.NodeRequest{Id: "n1"},
	}, {
		name:   "remove, forced",
		answer: &pb.RemoveNodeResponse{Id: "n1"},
		call:   func(ctx context.Context, c *Client) (any, error) { return c.RemoveNode(ctx, "n", true) },
		req:    &pb.RemoveNodeRequest{Id: "n", Force: true},
		want:   "n1",
	}, {
		name:   "update cluster",
		answer: &pb.ClusterInfo{ClusterId: "c1", MaxVoters: 5},
		call: func(ctx context.Context, c *Client) (any, error) {
			return c.UpdateCluster(ctx, ClusterUpdate{RequireApproval: &yes, MaxVoters: u32(5)})
		},
		req: &pb.UpdateClusterRequest{RequireApproval: &yes, MaxVoters: u32(5)},
	}, {
		name:   "events",
		answer: events,
		call:   func(ctx context.Context, c *Client) (any, error) { return c.ListEvents(ctx, 10) },
		req:    &pb.ListEventsRequest{Limit: 10},
		want:   events.Events,
	}, {
		name:   "show token",
		answer: &pb.TokenResponse{Token: testToken},
		call:   func(ctx context.Context, c *Client) (any, error) { return c.Token(ctx, "worker") },
		req:    &pb.GetTokenRequest{Role: "worker"},
		want:   testToken,
	}, {
		name:   "rotate token",
		answer: &pb.TokenResponse{Token: testToken},
		call:   func(ctx context.Context, c *Client) (any, error) { return c.RotateToken(ctx, "manager") },
		req:    &pb.RotateTokenRequest{Role: "manager"},
		want:   testToken,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{answer: func(proto.Message) (proto.Message, error) { return tc.answer, nil }}
			c := dialRecorder(t, r)
			got, err := tc.call(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if want == nil {
				want = tc.answer
			}
			if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]proto.Message{tc.req}, r.requests(), protocmp.Transform()); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBadInputIsRefusedBeforeSending: what the client can tell is wrong
// never reaches the cluster.
func TestBadInputIsRefusedBeforeSending(t *testing.T) {
	r := &recorder{answer: func(proto.Message) (proto.Message, error) { return nil, errors.New("reached the cluster") }}
	c := dialRecorder(t, r)
	for _, tc := range []struct {
		name string
		call func(context.Context) error
		want string
	}{
		{"empty ID", func(ctx context.Context) error { _, err := c.RemoveNode(ctx, " ", true); return err }, "node ID is empty"},
		{"empty ID to wait for", func(ctx context.Context) error { _, err := c.WaitNode(ctx, "", UntilVoter); return err }, "node ID is empty"},
		{"node update without a change", func(ctx context.Context) error { _, err := c.UpdateNode(ctx, "n1", NodeUpdate{}); return err }, "nothing to change"},
		{"unknown availability", func(ctx context.Context) error {
			_, err := c.UpdateNode(ctx, "n1", NodeUpdate{Availability: pb.Availability(9)})
			return err
		}, "availability 9 is not one of active, pause, drain"},
		{"bad label value", func(ctx context.Context) error {
			_, err := c.UpdateNode(ctx, "n1", NodeUpdate{LabelAdd: map[string]string{"k": "a b"}})
			return err
		}, `label k="a b": a value is empty or up to 63`},
		{"label added and removed", func(ctx context.Context) error {
			_, err := c.UpdateNode(ctx, "n1", NodeUpdate{LabelAdd: map[string]string{"k": "v"}, LabelRm: []string{"k"}})
			return err
		}, `label "k" is both added and removed: give one`},
		{"cluster update without a change", func(ctx context.Context) error { _, err := c.UpdateCluster(ctx, ClusterUpdate{}); return err }, "nothing to change"},
		{"token role", func(ctx context.Context) error { _, err := c.RotateToken(ctx, "admin"); return err }, `token role "admin" is not one of worker, manager`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want one containing %q", err, tc.want)
			}
		})
	}
	if reqs := r.requests(); len(reqs) != 0 {
		t.Errorf("bad input reached the cluster: %v", reqs)
	}
}

func TestParseInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func() (any, error)
		want any
		err  string
	}{
		{"availability", func() (any, error) { return ParseAvailability("pause") }, pb.Availability_AVAILABILITY_PAUSE, ""},
		{"availability in capitals", func() (any, error) { return ParseAvailability("DRAIN") }, nil, `availability "DRAIN" is not one of active, pause, drain`},
		{"labels, one given twice alike", func() (any, error) { return ParseLabels([]string{"a=1", "b=", "a=1"}) }, map[string]string{"a": "1", "b": ""}, ""},
		{"no labels", func() (any, error) { return ParseLabels(nil) }, map[string]string(nil), ""},
		{"label without =", func() (any, error) { return ParseLabels([]string{"zone"}) }, nil, `label "zone": give it as key=value`},
		{"label given twice unlike", func() (any, error) { return ParseLabels([]string{"k=1", "k=2"}) }, nil, `label "k" is given twice, as "1" and "2": give it once`},
		{"bad label key", func() (any, error) { return ParseLabels([]string{"-x=1"}) }, nil, `label key "-x": use 1 to 63`},
		{"keys, each once", func() (any, error) { return ParseLabelKeys([]string{"a", "b", "a"}) }, []string{"a", "b"}, ""},
		{"empty key", func() (any, error) { return ParseLabelKeys([]string{""}) }, nil, "the label key is empty"},
		{"key=value to remove", func() (any, error) { return ParseLabelKeys([]string{"k=v"}) }, nil, `label key "k=v": give only the key of the label to remove`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.run()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestMalformedTokenIsRefused(t *testing.T) {
	r := &recorder{answer: func(proto.Message) (proto.Message, error) { return &pb.TokenResponse{Token: "two words"}, nil }}
	c := dialRecorder(t, r)
	if _, err := c.Token(context.Background(), "worker"); err == nil || err.Error() != "the cluster returned a malformed token" {
		t.Errorf("error = %v, want the malformed token refused", err)
	}
}

// TestChangesGetTheLongerAttemptTimeout: a manager that takes longer than
// a read's attempt timeout to answer a change is waited for.
func TestChangesGetTheLongerAttemptTimeout(t *testing.T) {
	node := view("n1", pb.ManagerStatus_MANAGER_STATUS_NONE)
	r := &recorder{delay: 300 * time.Millisecond, answer: func(proto.Message) (proto.Message, error) { return node, nil }}
	c := dialRecorder(t, r, WithAttemptTimeout(100*time.Millisecond), WithChangeAttemptTimeout(5*time.Second), WithRounds(1))
	ctx := context.Background()
	if _, err := c.ApproveNode(ctx, "n1"); err != nil {
		t.Errorf("ApproveNode: %v", err)
	}
	if _, err := c.GetNode(ctx, "n1"); !errors.Is(err, ErrNoManager) {
		t.Errorf("GetNode error = %v, want ErrNoManager after the read's attempt timeout", err)
	}
}

// TestWaitNode: the wait asks until the condition holds, rides out an
// election, stops at the condition's error or the cluster's answer, and
// says where the node was when ctx ended.
func TestWaitNode(t *testing.T) {
	const id = "n1"
	learner := view(id, pb.ManagerStatus_MANAGER_STATUS_LEARNER, pb.Role_ROLE_CONSENSUS)
	voter := view(id, pb.ManagerStatus_MANAGER_STATUS_REACHABLE, pb.Role_ROLE_CONSENSUS)
	worker := view(id, pb.ManagerStatus_MANAGER_STATUS_NONE, pb.Role_ROLE_WORKER)
	demoting := view(id, pb.ManagerStatus_MANAGER_STATUS_LEADER, pb.Role_ROLE_CONSENSUS)
	demoting.Node.Demoting = true
	election := status.Error(codes.Unavailable, "no curator leader is elected right now")
	notFound := status.Error(codes.NotFound, "no node n1")
	type answer struct {
		v   *pb.NodeView
		err error
	}
	for _, tc := range []struct {
		name    string
		answers []answer // the last repeats
		until   NodeCondition
		want    *pb.NodeView
		wantErr func(error) bool
		gets    int // 0: any number
	}{
		{"until a voter", []answer{{v: learner}, {v: learner}, {v: voter}}, UntilVoter, voter, nil, 3},
		{"through an election", []answer{{v: learner}, {err: election}, {v: voter}}, UntilVoter, voter, nil, 3},
		{"until demoted", []answer{{v: demoting}, {v: worker}}, UntilDemoted, worker, nil, 2},
		{"the role lost", []answer{{v: learner}, {v: worker}}, UntilVoter, nil, func(err error) bool { return errors.Is(err, ErrRoleLost) }, 2},
		{"the cluster's answer", []answer{{v: learner}, {err: notFound}}, UntilVoter, nil, func(err error) bool { return status.Code(err) == codes.NotFound }, 2},
		{"ctx ends", []answer{{v: learner}}, UntilVoter, nil, func(err error) bool {
			var werr *WaitError
			return errors.As(err, &werr) && errors.Is(err, context.DeadlineExceeded) &&
				proto.Equal(werr.Last, learner) && werr.ID == id
		}, 0},
		{"ctx ends in an election", []answer{{v: learner}, {err: election}}, UntilVoter, nil, func(err error) bool {
			var werr *WaitError
			return errors.As(err, &werr) && proto.Equal(werr.Last, learner) && errors.Is(werr.LastErr, ErrNoManager) &&
				strings.Contains(err.Error(), "the last try failed")
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := scripted(len(tc.answers), func(i int) (proto.Message, error) { return tc.answers[i].v, tc.answers[i].err })
			c := dialRecorder(t, r, WithPollInterval(5*time.Millisecond), WithRounds(1))
			// The cases that end with the cluster's answer get all the
			// time a busy machine needs; those that end with ctx, 300 ms.
			timeout := 10 * time.Second
			if tc.gets == 0 {
				timeout = 300 * time.Millisecond
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			got, err := c.WaitNode(ctx, id, tc.until)
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("error: %v", err)
			case tc.wantErr != nil && !tc.wantErr(err):
				t.Fatalf("unexpected error: %v", err)
			}
			if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("node (-want +got):\n%s", diff)
			}
			reqs := r.requests()
			if tc.gets != 0 && len(reqs) != tc.gets {
				t.Errorf("%d GetNode calls, want %d", len(reqs), tc.gets)
			}
			for _, req := range reqs {
				if diff := cmp.Diff(&pb.GetNodeRequest{Id: id}, req, protocmp.Transform()); diff != "" {
					t.Errorf("request (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestWaitRollout: a rollout waited for until it ends, through an
// election, with the cluster's refusal returned as it is and the last
// rollout seen when ctx ends; the condition sees every answer.
func TestWaitRollout(t *testing.T) {
	const group = "workers"
	rolling := &pb.Rollout{Group: group, State: pb.RolloutState_ROLLOUT_STATE_ROLLING, Updated: 1, Total: 2}
	back := &pb.Rollout{Group: group, State: pb.RolloutState_ROLLOUT_STATE_ROLLING, RollbackOf: "bad"}
	done := &pb.Rollout{Group: group, State: pb.RolloutState_ROLLOUT_STATE_DONE, Updated: 2, Total: 2, RollbackOf: "bad"}
	failed := &pb.Rollout{Group: group, State: pb.RolloutState_ROLLOUT_STATE_FAILED, Reason: "machine m1 exited"}
	election := status.Error(codes.Unavailable, "no curator leader is elected right now")
	type answer struct {
		r   *pb.Rollout
		err error
	}
	for _, tc := range []struct {
		name    string
		answers []answer // the last repeats
		want    *pb.Rollout
		wantErr func(error) bool
		seen    int // answers the condition saw; 0: any number
	}{
		{"until done, through a rollback", []answer{{r: rolling}, {r: back}, {r: done}}, done, nil, 3},
		{"through an election", []answer{{r: rolling}, {err: election}, {r: failed}}, failed, nil, 2},
		{"the cluster's answer", []answer{{r: rolling}, {err: status.Error(codes.NotFound, "no group workers")}}, nil, func(err error) bool { return status.Code(err) == codes.NotFound }, 1},
		{"ctx ends", []answer{{r: rolling}, {err: election}}, rolling, func(err error) bool {
			return errors.Is(err, context.DeadlineExceeded) && strings.Contains(err.Error(), "the last try failed")
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := scripted(len(tc.answers), func(i int) (proto.Message, error) { return tc.answers[i].r, tc.answers[i].err })
			c := dialRecorder(t, r, WithPollInterval(5*time.Millisecond), WithRounds(1))
			timeout := 10 * time.Second
			if tc.seen == 0 {
				timeout = 300 * time.Millisecond
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			seen := 0
			got, err := c.WaitRollout(ctx, group, func(r *pb.Rollout) (bool, error) { seen++; return RolloutEnded(r) })
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("error: %v", err)
			case tc.wantErr != nil && !tc.wantErr(err):
				t.Fatalf("unexpected error: %v", err)
			}
			if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("rollout (-want +got):\n%s", diff)
			}
			if tc.seen != 0 && seen != tc.seen {
				t.Errorf("the condition saw %d answers, want %d", seen, tc.seen)
			}
			for _, req := range r.requests() {
				if diff := cmp.Diff(&pb.GetRolloutRequest{Group: group}, req, protocmp.Transform()); diff != "" {
					t.Errorf("request (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestListNodesSmallerPageAfterTooLarge: a page larger than what gRPC
// takes (a leader that bounds its pages by count alone, nodes with many
// labels) is asked again smaller, and the listing goes on.
func TestListNodesSmallerPageAfterTooLarge(t *testing.T) {
	big := strings.Repeat("v", 1000)
	r := &recorder{answer: func(req proto.Message) (proto.Message, error) {
		ask := req.(*pb.ListNodesRequest)
		resp := &pb.ListNodesResponse{}
		if ask.PageSize > listPageFallback {
			for i := range int(ask.PageSize) {
				resp.Nodes = append(resp.Nodes, &pb.NodeView{Node: &pb.Node{Id: strconv.Itoa(i), Labels: map[string]string{"k": big}}})
			}
			return resp, nil
		}
		if ask.PageToken == "" {
			return &pb.ListNodesResponse{Nodes: []*pb.NodeView{view("a", 0)}, NextPageToken: "a"}, nil
		}
		return &pb.ListNodesResponse{Nodes: []*pb.NodeView{view("b", 0)}}, nil
	}}
	c := dialRecorder(t, r)
	nodes, err := c.ListNodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, n := range nodes {
		ids = append(ids, n.Node.Id)
	}
	if !slices.Equal(ids, []string{"a", "b"}) {
		t.Errorf("listed %v, want a and b", ids)
	}
	var sizes []uint32
	for _, req := range r.requests() {
		sizes = append(sizes, req.(*pb.ListNodesRequest).PageSize)
	}
	if want := []uint32{ListPageSize, listPageFallback, listPageFallback}; !slices.Equal(sizes, want) {
		t.Errorf("pages asked %v, want %v", sizes, want)
	}
}
