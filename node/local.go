package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
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
		srv.Stop()
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

func (l *localServer) Leave(context.Context, *pb.LeaveRequest) (*pb.LeaveResponse, error) {
	return nil, status.Error(codes.Unimplemented, "`curator agent leave` is not built yet in this version of curator")
}
