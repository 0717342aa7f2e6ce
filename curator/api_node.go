package curator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/consensus"
	"github.com/curatorproject/curator/curator/internal/leader"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/provider"
	"github.com/curatorproject/curator/supervisor"
)

// nodeAPI is the node agents' API (curator.v1.Curator), served by the
// leader: a node joins (Register), keeps its session (Heartbeat), finds
// the managers (GetManagers) and leaves (Leave). Each
// call acts through the leadership it finds (leaderFor); followers never
// reach it, as they forward every call.
type nodeAPI struct {
	pb.UnimplementedCuratorServer
	s *Service
}

// Register joins a node. With the manager token the node also becomes a
// consensus member, within the voter limit: the etcd learner is added
// first, then the role is written together with the join parameters (if we
// die in between, the consensus sync finishes or undoes it).
func (a *nodeAPI) Register(ctx context.Context, req *pb.RegisterRequest) (*pb.RegisterResponse, error) {
	s := a.s
	st, err := s.leaderFor()
	if err != nil {
		return nil, err
	}
	// A join the token refuses is recorded (join_refusals.go).
	tok, err := pki.ParseToken(req.Token)
	if err != nil {
		return nil, s.refuseJoin(ctx, st, refusedMalformed, req.Name, fmt.Errorf("%w: %v", spec.ErrInvalid, err))
	}
	if err := tok.VerifyCA(st.PKI.CA.Cert); err != nil {
		return nil, s.refuseJoin(ctx, st, refusedOtherCluster, req.Name, fmt.Errorf("%w: %v", spec.ErrDenied, err))
	}
	// A read of the record that starts after this call did (shared with
	// the Registers that ask at once): a token rotated before is refused.
	cs, err := s.clusterReads.Load(ctx)
	if err != nil {
		return nil, err
	}
	role, ok := spec.TokenRole(cs, tok.Secret)
	if !ok {
		return nil, s.refuseJoin(ctx, st, refusedSecret, req.Name, fmt.Errorf("%w: the join token is not valid (it may have been rotated): get a current one with `curator token show worker` or `curator token show manager`", spec.ErrDenied))
	}
	if err := spec.CheckReleaseSkew(role, req.Version, managerReleases(st, "")); err != nil {
		return nil, s.refuseJoin(ctx, st, refusedRelease, req.Name, err)
	}
	pub, err := spec.ParsePublicKey(req.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("%w: public key: %v", spec.ErrInvalid, err)
	}
	id, err := pki.NodeID(pub)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", spec.ErrInvalid, err)
	}
	ip, port, err := spec.SplitAddress(req.Address)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", spec.ErrInvalid, err)
	}
	name := req.Name
	if name == "" {
		name = id[:12]
	} else if err := spec.ValidateNodeName(name); err != nil {
		return nil, fmt.Errorf("%w: %v", spec.ErrInvalid, err)
	}
	availability := req.Availability
	if availability == pb.Availability_AVAILABILITY_UNSPECIFIED {
		availability = pb.Availability_AVAILABILITY_ACTIVE
	}
	if _, ok := pb.Availability_name[int32(availability)]; !ok {
		return nil, fmt.Errorf("%w: unknown availability %d", spec.ErrInvalid, availability)
	}
	if err := spec.ValidateMachine(req.Group, req.InstanceId, req.ConfigSha, req.Labels); err != nil {
		return nil, fmt.Errorf("%w: %v", spec.ErrInvalid, err)
	}

	// The certificate depends on the key and address alone: sign it
	// outside the lock, which every join takes in turn.
	cert, err := st.PKI.CA.Issue(pki.CertRequest{PublicKey: pub, NodeID: id, Role: pki.RoleNode, IPs: []net.IP{ip}, Validity: spec.CertTTL(cs)})
	if err != nil {
		return nil, fmt.Errorf("issue node certificate: %w", err)
	}
	response := func() (*pb.RegisterResponse, error) {
		return &pb.RegisterResponse{
			NodeId: id, NodeCert: pki.EncodeCert(cert), CaCert: pki.EncodeCert(st.PKI.CA.Cert),
			ClusterId: cs.ClusterId, Managers: slices.Clone(st.Reg.ManagerList()),
		}, nil
	}

	now := timestamppb.New(s.cfg.Now())
	node := &pb.Node{
		Id: id, Name: name, Address: req.Address,
		State:        pb.NodeState_NODE_STATE_UP,
		Roles:        []pb.Role{pb.Role_ROLE_WORKER},
		Availability: availability,
		Status:       pb.NodeStatus_NODE_STATUS_UNKNOWN,
		Version:      req.Version,
		Created:      now, Updated: now, StatusChanged: now,
		PublicKey:  req.PublicKey,
		Labels:     maps.Clone(req.Labels),
		JoinedAs:   role.String(),
		Group:      req.Group,
		InstanceId: req.InstanceId,
		ConfigSha:  req.ConfigSha,
		// A retried registration hands out a new certificate, and the
		// record keeps the first one's expiry: the agent renews by its
		// own certificate, whose expiry the renewal records.
		CertExpires: timestamppb.New(cert.NotAfter),
	}
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	lg := s.logger(ctx)
	requireApproval := cs.RequireApproval
	vouched := ""
	if requireApproval && req.Group != "" && req.InstanceId != "" {
		// A machine of a group: the leader made it, and vouches for it
		// when the group's provider lists its instance with the
		// cluster's and the group's labels.
		if vouched = groupMade(ctx, st, cs, req.Group, req.InstanceId); vouched != "" {
			requireApproval = false
		}
	}
	if requireApproval {
		// Pending: no role and no etcd access until an operator approves.
		node.State = pb.NodeState_NODE_STATE_PENDING
		node.Roles = nil
	}
	var again bool
	if role == spec.JoinManager && !requireApproval {
		again, err = a.registerManager(ctx, st, cs, node, pub, ip, port)
	} else {
		again, err = st.Joins.Submit(ctx, st, node)
	}
	if errors.Is(err, spec.ErrDenied) {
		return nil, s.refuseJoin(ctx, st, refusedRemoved, req.Name, err)
	}
	if err != nil {
		return nil, err
	}
	if !again && vouched != "" {
		recordNodeEvent(ctx, st, id, "approve-group-machine", fmt.Sprintf("node %s (%s) joins without waiting for approval (require-approval is on): %s", id, name, vouched))
	} else if !again && requireApproval {
		recordNodeEvent(ctx, st, id, "pending-approval", fmt.Sprintf("node %s (%s) joined and waits for an operator's approval (require-approval is on; not a machine a group made): `curator node approve %s`", id, name, id))
	}
	if !again {
		lg.Info("node joined", zap.String("node", id), zap.String("name", name), zap.String("address", req.Address), zap.Stringer("token", role))
	}
	return response()
}

// The leader serves node sessions itself only while no other manager can:
// a node whose session reached it directly is asked to move to another
// manager (HeartbeatResponse.move_within_ms), at a moment of the node's own
// within four intervals, so a wave of sessions moves spread out. A session
// through a follower costs the leader less (the leader holds its
// followers' connections instead of a third of the fleet's: at 10,000
// nodes its CPU at rest fell by a quarter and its memory by two fifths,
// BENCHMARKS.md), and a leader that dies then takes no session with it: its
// followers carry their sessions over to the next leader, so a failover
// is not a reconnection storm. The leader asks only once it has led for
// down-after (not during a failover's arrivals), and only while another
// manager is ready. A node that no other manager takes comes back and
// stays (node.Session).

// sessionMoveWindow is how many heartbeat intervals a node is given to
// move its session off the leader.
const sessionMoveWindow = 4

// sessionMoveWithin is the move_within_ms of the leader's answers to a
// session that reached it directly: 0 (stay) unless the leader has led for
// down-after and another manager is ready and heard by this leader within
// down-after (a record's "ready" may be the previous leader's word about a
// manager that died with it).
func sessionMoveWithin(st *leader.State, now time.Time) uint32 {
	if now.Sub(st.Heartbeats.ServingSince()) < st.Cfg.DownAfter {
		return 0
	}
	for _, n := range st.Reg.MembershipNodes() {
		if n.Id == st.Cfg.NodeID || n.State != pb.NodeState_NODE_STATE_UP || n.Status != pb.NodeStatus_NODE_STATUS_READY ||
			!spec.HasRole(n, pb.Role_ROLE_CONSENSUS) {
			continue
		}
		if last, ok := st.Heartbeats.Get(n.Id); ok && now.Sub(last) < st.Cfg.DownAfter {
			return uint32(sessionMoveWindow * st.Cfg.HeartbeatInterval / time.Millisecond)
		}
	}
	return 0
}

// groupMade says why the leader vouches for instance of group (a
// machine its group's provider lists with the cluster's and the group's
// labels, so the leader made it), or "" when it does not.
func groupMade(ctx context.Context, st *leader.State, cs *pb.ClusterState, group, instance string) string {
	g, err := store.GroupLoad(ctx, st.Cfg.Etcd, group)
	if err != nil || g == nil {
		return ""
	}
	p, err := st.Machines.Provider(g)
	if err != nil {
		return ""
	}
	machines, err := p.List(ctx, map[string]string{provider.LabelCluster: cs.ClusterId, provider.LabelGroup: group})
	if _, partial := provider.Unreachable(err); partial {
		err = nil // a machine of a domain that answered is vouched for
	}
	if err != nil {
		return ""
	}
	for _, m := range machines {
		if m.ID == instance {
			return fmt.Sprintf("group %s made its machine %s (its provider lists it with this cluster's labels), so the leader vouches for it", group, instance)
		}
	}
	return ""
}

// recordNodeEvent records an event about node id, from the node API.
func recordNodeEvent(ctx context.Context, st *leader.State, id, action, reason string) {
	if err := store.EventRecord(ctx, st.Lead.Fence, st.Events.Event("joins", action, id, reason)); err != nil {
		st.Cfg.Logger.Warn("could not record event", zap.Error(err))
	}
}

// registerManager joins a node with the manager token: within the voter
// limit it becomes an etcd learner first, then its record is written with
// the role and the join parameters (if we die in between, the consensus
// sync finishes or undoes it).
func (a *nodeAPI) registerManager(ctx context.Context, st *leader.State, cs *pb.ClusterState, node *pb.Node, pub any, ip net.IP, port int) (again bool, err error) {
	s := a.s
	st.Lead.MuNodes.Lock()
	defer st.Lead.MuNodes.Unlock()
	if again, err := leader.CheckJoin(st.Reg, node); again || err != nil {
		return again, err
	}
	members, err := consensus.Members(ctx, s.cfg.Etcd)
	if err != nil {
		return false, err
	}
	if uint32(len(members)) >= cs.MaxVoters {
		s.logger(ctx).Warn("voter limit reached: node joins as a worker", zap.String("node", node.Id), zap.Uint32("max_voters", cs.MaxVoters))
	} else {
		join, err := st.Roles.AddConsensusMember(ctx, node.Id, pub, ip, port, spec.CertTTL(cs))
		if err != nil {
			return false, err
		}
		node.Roles = []pb.Role{pb.Role_ROLE_CONSENSUS, pb.Role_ROLE_WORKER}
		node.Consensus = join
	}
	return false, store.NodeCreate(ctx, st.Lead.Fence, node)
}

// Heartbeat is the node's session: it records each message from the node
// in the leader's memory and answers it, and it carries the node's own
// record and the manager list when either changes (in the first answer,
// then as they change: sessionPushes). The stream ends when the
// leadership does, when this leader doubts its lease, or when the node is
// removed, at the node's next heartbeat: the handler reads the stream
// itself, with no goroutine beside it (at a fleet's size each goroutine
// per node is thousands of stacks).
func (a *nodeAPI) Heartbeat(stream grpc.BidiStreamingServer[pb.HeartbeatRequest, pb.HeartbeatResponse]) error {
	s := a.s
	st, err := s.leaderFor()
	if err != nil {
		return err
	}
	id := identityFrom(stream.Context()).nodeID
	forwarded := len(metadata.ValueFromIncomingContext(stream.Context(), forwardedForKey)) > 0
	ss := &leader.SessionStream{
		ID: id, Reg: st.Reg, Leader: s.cfg.NodeID, Interval: uint32(s.cfg.HeartbeatInterval / time.Millisecond),
		Send: stream.Send,
	}
	if id != s.cfg.NodeID && !forwarded {
		// The node reached the leader itself, not through another
		// manager.
		ss.MoveWithin = func() uint32 { return sessionMoveWithin(st, s.cfg.Now()) }
	}
	defer ss.Close()
	if err := ss.Answer(0); err != nil {
		return err
	}
	dropped, release := st.Streams.Open(id)
	defer release()
	defer st.Pushes.Open(ss)()
	// A change between the first answer and the stream's registration
	// is carried at once all the same.
	ss.Kick()
	doubt := st.Guard.ServingDone()
	// A forwarder that opened the stream again sends the node's last
	// heartbeat first: answered, not taken for news of the node.
	replayed := firstReplayed(stream.Context())
	// The release the node's record was last told of on this stream.
	noted := ""
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		s.metrics.SessionHeartbeats.Inc()
		select {
		case <-dropped:
			return fmt.Errorf("%w: node %s was removed from the cluster", spec.ErrDenied, id)
		case <-st.Ctx.Done():
			return spec.ErrNotLeader
		case <-doubt:
			// A leader in doubt about its lease: the node moves to
			// whoever can serve it.
			return spec.ErrNotLeader
		default:
		}
		if !replayed {
			st.Heartbeats.Beat(id, s.cfg.Now())
			n := st.Reg.Node(id)
			if n == nil || n.Status != pb.NodeStatus_NODE_STATUS_READY {
				supervisor.Kick(st.KickHealth)
			}
			if n != nil && req.Version != "" && req.Version != n.Version && req.Version != noted {
				if err := sessionReleaseCheck(st, id, req.Version); err != nil {
					return err
				}
				// The node runs another release than its record says
				// (restarted on a new binary): recorded beside the
				// session, which does not wait on the node records.
				noted = req.Version
				go noteRelease(st, id, req.Version)
			}
		}
		replayed = false
		s.trace(livenessEvent{kind: answeredHere, manager: s.cfg.NodeID, node: id, seq: req.Seq, follow: req.DigestsFollow && forwarded})
		if err := ss.Answer(req.Seq); err != nil {
			return err
		}
		if req.DigestsFollow && forwarded {
			// The forwarder reports the node's heartbeats in its
			// liveness digests (liveness.go): nothing more to read.
			return awaitSessionEnd(stream.Context(), st, dropped, doubt, id)
		}
	}
}

// managerReleases lists the releases the managers' records say they run,
// but node except's.
func managerReleases(st *leader.State, except string) []string {
	var out []string
	for _, n := range st.Reg.MembershipNodes() {
		if n.Id != except && spec.HasRole(n, pb.Role_ROLE_CONSENSUS) {
			out = append(out, n.Version)
		}
	}
	return out
}

// sessionReleaseCheck judges the release node id's session reports
// against the managers' (spec.CheckReleaseSkew), as a manager when its
// record holds the consensus role.
func sessionReleaseCheck(st *leader.State, id, release string) error {
	role := spec.JoinWorker
	if n := st.Reg.Node(id); n != nil && spec.HasRole(n, pb.Role_ROLE_CONSENSUS) {
		role = spec.JoinManager
	}
	return spec.CheckReleaseSkew(role, release, managerReleases(st, id))
}

// noteRelease records in node id's record the release its session
// reports, within a heartbeat interval's bound or two seconds, whichever
// is longer: a record not changed now is changed at the node's next
// session.
func noteRelease(st *leader.State, id, release string) {
	ctx, cancel := context.WithTimeout(st.Ctx, max(2*time.Second, st.Cfg.HeartbeatInterval))
	defer cancel()
	err := st.Records.ChangeNode(ctx, id, func(n *pb.Node) bool {
		changed := n.Version != release
		n.Version = release
		return changed
	})
	if err != nil && st.Ctx.Err() == nil {
		st.Cfg.Logger.Warn("could not record a node's release", zap.String("node", id), zap.String("release", release), zap.Error(err))
	}
}

// awaitSessionEnd holds a session stream whose heartbeats come in a
// follower's liveness digests until it ends: the node removed, the
// leadership over or in doubt, or the follower ending it.
func awaitSessionEnd(ctx context.Context, st *leader.State, dropped <-chan struct{}, doubt <-chan struct{}, id string) error {
	select {
	case <-dropped:
		return fmt.Errorf("%w: node %s was removed from the cluster", spec.ErrDenied, id)
	case <-st.Ctx.Done():
		return spec.ErrNotLeader
	case <-doubt:
		return spec.ErrNotLeader
	case <-ctx.Done():
		return ctx.Err()
	}
}

// GetManagers lists the managers and the leader.
func (a *nodeAPI) GetManagers(ctx context.Context, _ *pb.GetManagersRequest) (*pb.GetManagersResponse, error) {
	if st := a.s.currentLeader(); st != nil {
		return &pb.GetManagersResponse{Managers: slices.Clone(st.Reg.ManagerList()), Leader: a.s.cfg.NodeID}, nil
	}
	nodes, err := store.NodeList(ctx, a.s.cfg.Etcd)
	if err != nil {
		return nil, err
	}
	return &pb.GetManagersResponse{Managers: store.Managers(slices.Values(nodes)), Leader: a.s.cfg.NodeID}, nil
}

// leaveOutcome says how far a Leave got; its String is the response's
// outcome, which the agent reads.
type leaveOutcome string

const (
	// leaveLeft: the node's record is gone; it wipes itself.
	leaveLeft leaveOutcome = "left"
	// leaveDemoting: the node led the curators and resigned; it calls
	// again once the next leader has finished its demotion.
	leaveDemoting leaveOutcome = "demoting"
)

func (o leaveOutcome) String() string { return string(o) }

func leaveResponse(o leaveOutcome, format string, args ...any) *pb.NodeLeaveResponse {
	return &pb.NodeLeaveResponse{Outcome: o.String(), Message: fmt.Sprintf(format, args...)}
}

// Leave: the calling node leaves. A manager is demoted first, with the
// guards; when it is the leader it hands over, and the node calls again.
func (a *nodeAPI) Leave(ctx context.Context, req *pb.NodeLeaveRequest) (*pb.NodeLeaveResponse, error) {
	s := a.s
	st, err := s.leaderFor()
	if err != nil {
		return nil, err
	}
	id := identityFrom(ctx).nodeID
	shared, unlock, err := st.Records.LockCaller(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	n := store.CloneNode(shared)
	ms, err := st.Members.Observe(ctx)
	if err != nil {
		return nil, err
	}
	mem, member := ms.MemberOf[id]
	if member || spec.HasRole(n, pb.Role_ROLE_CONSENSUS) {
		if member && !mem.IsLearner && ms.QuorumAfter(mem.ID, 0).Voters == 0 {
			if !req.Force {
				return nil, fmt.Errorf("%w: node %s is the last manager: leaving destroys the cluster, its %d node records, CA and join tokens; pass --force to do it anyway", spec.ErrPrecondition, id, st.Reg.Count())
			}
			// The last manager leaves with --force: the cluster goes with
			// it. Nothing to hand over; the node wipes itself.
			return leaveResponse(leaveLeft, "node %s was the last manager: the cluster is destroyed", id), nil
		}
		outcome, err := st.Roles.Demote(ctx, n)
		if err != nil {
			return nil, err
		}
		if outcome == leader.HandedOver {
			return leaveResponse(leaveDemoting, "this node led the curators: it resigned, and the next leader finishes its demotion"), nil
		}
		if outcome == leader.LeftToLoops {
			return leaveResponse(leaveDemoting, "the Swarm did not take the demotion of this node's Swarm manager yet: the leader's loops finish its demotion"), nil
		}
	}
	swarmOn, err := st.Swarm.On(ctx)
	if err != nil {
		return nil, err
	}
	if err := st.Records.DestroyNode(ctx, id); err != nil {
		return nil, err
	}
	resp := leaveResponse(leaveLeft, "node %s left the cluster", id)
	resp.LeaveSwarm = swarmOn
	return resp, nil
}
