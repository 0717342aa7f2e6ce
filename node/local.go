package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
)

// The local agent service listens on a unix socket in the data dir, mode
// 0600: whoever can read the data dir (and so the node's key) may use it.
type localServer struct {
	pb.UnimplementedAgentServer
	a *Agent
}

func (a *Agent) runLocal(ctx context.Context) error {
	path := SocketPath(a.cfg.DataDir)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("local agent socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		lis.Close()
		return err
	}
	srv := grpc.NewServer()
	pb.RegisterAgentServer(srv, &localServer{a: a})
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	supervisor.Signal(ctx, supervisor.Healthy)
	select {
	case <-ctx.Done():
		// Let a Leave call that stopped the agent return its answer.
		stopped := make(chan struct{})
		go func() { srv.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(2 * time.Second):
			srv.Stop()
		}
		<-errc
		return ctx.Err()
	case err := <-errc:
		return err
	}
}

func (l *localServer) Status(context.Context, *pb.AgentStatusRequest) (*pb.AgentStatus, error) {
	a := l.a
	out := &pb.AgentStatus{NodeId: a.state.NodeID, Address: a.state.Address, Consensus: "none"}
	if n, known, _ := a.desired.get(); known {
		out.Roles = n.Roles
	}
	if e, cur := a.consensus.get(); e != nil {
		out.Consensus = e.Status().State.String()
		out.CuratorLeader = cur != nil && cur.IsLeader()
	}
	return out, nil
}

// Leave leaves the cluster: it asks the leader until the node is gone from
// the registry (a manager is demoted first, and a leader hands over, which
// takes a second call), then stops the agent, which wipes the data dir.
func (l *localServer) Leave(ctx context.Context, req *pb.LeaveRequest) (_ *pb.LeaveResponse, err error) {
	a := l.a
	a.leaving.Store(true)
	defer func() {
		if err != nil {
			a.leaving.Store(false) // still in the cluster: a refusal is news again
		}
	}()
	cli := pb.NewCuratorClient(a.conn)
	resp, err := leaveCalls(ctx, a.cfg.Logger, func(ctx context.Context) (*pb.NodeLeaveResponse, error) {
		return cli.Leave(ctx, &pb.NodeLeaveRequest{Force: req.Force})
	})
	if err != nil {
		return nil, err
	}
	if resp == nil {
		a.requestLeave()
		return &pb.LeaveResponse{Message: fmt.Sprintf("node %s left the cluster", a.state.NodeID)}, nil
	}
	msg := resp.Message
	if resp.LeaveSwarm && a.docker != nil {
		msg += "; " + a.leaveSwarm(ctx)
	}
	a.requestLeave()
	return &pb.LeaveResponse{Message: msg}, nil
}

// leaveRetry is the wait before a leave is asked again (a demotion, or a
// leader change, under way).
const leaveRetry = 300 * time.Millisecond

// leaveCalls asks the leader to let this node leave (call) until it has
// left: it returns the leader's answer that says so, or nil when an
// earlier call went through but its answer was lost (the cluster no
// longer knows the node).
func leaveCalls(ctx context.Context, lg *zap.Logger, call func(context.Context) (*pb.NodeLeaveResponse, error)) (*pb.NodeLeaveResponse, error) {
	asked := false // a call reached the leader, or may have
	for {
		resp, err := call(ctx)
		code := status.Code(err)
		switch {
		case err == nil && resp.Outcome == "left":
			return resp, nil
		case err == nil:
			asked = true
			lg.Info("leaving: " + resp.Message)
		case code == codes.PermissionDenied && !isRefusal(err):
			// The manager the call went through was demoted a moment
			// ago (this node itself, as it leaves as a manager): the
			// leader refused to take the call from it. Ask again.
		case code == codes.PermissionDenied && asked:
			// An earlier call went through but its answer was lost (the
			// manager that forwarded it stopped, as a demoted one does):
			// the cluster no longer knows this node. It has left.
			return nil, nil
		case code == codes.Unavailable || (code == codes.Canceled && ctx.Err() == nil):
			asked = true
		default:
			return nil, err
		}
		// Demoting, or a leader change under way: ask again shortly.
		t := time.NewTimer(leaveRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, status.Error(codes.DeadlineExceeded, "leave did not finish in time: the node is still in the cluster; run `curator agent leave` again")
		case <-t.C:
		}
	}
}

// RequestLeave asks the agent running on dataDir to leave the cluster, and
// returns what it said.
func RequestLeave(ctx context.Context, dataDir string, force bool) (string, error) {
	path := SocketPath(dataDir)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("no agent is running on %s (no %s): start it with `curator agent run --data-dir %s` first", dataDir, path, dataDir)
	}
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "", err
	}
	defer conn.Close()
	resp, err := pb.NewAgentClient(conn).Leave(ctx, &pb.LeaveRequest{Force: force})
	if err != nil {
		if st, ok := status.FromError(err); ok {
			return "", fmt.Errorf("leave: %s", st.Message())
		}
		return "", fmt.Errorf("leave: %w", err)
	}
	return resp.Message + "; the agent stops and wipes " + dataDir, nil
}
