package plugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/provider"
)

// NewFunc makes a plugin's provider from the group's
// provider.plugin.config; its error (a setting missing or wrong) is what
// the leader reports of the group.
type NewFunc func(config map[string]string) (provider.Provider, error)

// Serve serves the provider newProvider makes as a plugin, and returns
// when the leader that started the process ends it. It is the whole main
// of a plugin:
//
//	func main() { plugin.Serve(mycloud.New) }
//
// Run by hand (not by a leader), it says it is a plugin and exits with
// status 1. Whatever the plugin writes to stderr goes to the leader's log.
func Serve(newProvider NewFunc) {
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         goplugin.PluginSet{pluginName: &grpcPlugin{server: &server{newProvider: newProvider}}},
		GRPCServer:      goplugin.DefaultGRPCServer,
		// go-plugin's own news, warnings and worse only, as JSON lines the
		// leader's side reads.
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: os.Stderr, JSONFormat: true}),
	})
}

// grpcPlugin is the go-plugin plugin on both sides: server serves it in
// the plugin, and the leader's side takes the client.
type grpcPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	server *server
}

func (p *grpcPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterProviderPluginServer(s, p.server)
	return nil
}

func (p *grpcPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return pb.NewProviderPluginClient(c), nil
}

// server is the plugin's side of the ProviderPlugin service: the
// provider Configure made, called as the leader asks.
type server struct {
	pb.UnimplementedProviderPluginServer
	newProvider NewFunc

	mu sync.Mutex
	p  provider.Provider
}

// errNotConfigured refuses a call before Configure.
var errNotConfigured = status.Error(codes.FailedPrecondition, "the plugin is not configured: the leader calls Configure first")

func (s *server) provider() (provider.Provider, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil {
		return nil, errNotConfigured
	}
	return s.p, nil
}

func (s *server) Configure(_ context.Context, req *pb.PluginConfigureRequest) (*pb.PluginConfigureResponse, error) {
	p, err := s.newProvider(req.GetConfig())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "config: %v", err)
	}
	s.mu.Lock()
	s.p = p
	s.mu.Unlock()
	return &pb.PluginConfigureResponse{}, nil
}

func (s *server) Provision(ctx context.Context, req *pb.PluginProvisionRequest) (*pb.PluginInstance, error) {
	p, err := s.provider()
	if err != nil {
		return nil, err
	}
	in, err := p.Provision(ctx, specFromProto(req.GetSpec()))
	if err != nil {
		return nil, statusOf(err)
	}
	return instanceToProto(in), nil
}

func (s *server) Destroy(ctx context.Context, req *pb.PluginDestroyRequest) (*pb.PluginDestroyResponse, error) {
	p, err := s.provider()
	if err != nil {
		return nil, err
	}
	if err := p.Destroy(ctx, req.GetId()); err != nil {
		return nil, statusOf(err)
	}
	return &pb.PluginDestroyResponse{}, nil
}

func (s *server) List(ctx context.Context, req *pb.PluginListRequest) (*pb.PluginListResponse, error) {
	p, err := s.provider()
	if err != nil {
		return nil, err
	}
	insts, err := p.List(ctx, req.GetSelector())
	out := &pb.PluginListResponse{}
	if err != nil {
		// Some failure domains listed, others not: what was listed goes
		// with the others' names, never as if it were whole.
		domains, partial := provider.Unreachable(err)
		if !partial {
			return nil, statusOf(err)
		}
		out.Unreachable = map[string]string{}
		for d, why := range domains {
			out.Unreachable[d] = fmt.Sprint(why)
		}
	}
	for _, in := range insts {
		out.Instances = append(out.Instances, instanceToProto(in))
	}
	return out, nil
}

func (s *server) LastWords(ctx context.Context, req *pb.PluginLastWordsRequest) (*pb.PluginLastWordsResponse, error) {
	p, err := s.provider()
	if err != nil {
		return nil, err
	}
	lw, ok := p.(provider.LastWords)
	if !ok {
		return &pb.PluginLastWordsResponse{}, nil
	}
	w, err := lw.LastWords(ctx, req.GetId())
	if err != nil {
		return nil, statusOf(err)
	}
	return &pb.PluginLastWordsResponse{Words: w}, nil
}

// statusOf is a provider's error as the leader gets it: its text, under
// the code of a context's end when it is one.
func statusOf(err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	}
	return status.Error(codes.Unknown, fmt.Sprint(err))
}

// Runs answers what the served provider's machines run, when it says
// (provider.Runner); Unimplemented when it does not.
func (s *server) Runs(ctx context.Context, _ *pb.PluginRunsRequest) (*pb.PluginRunsResponse, error) {
	p, err := s.provider()
	if err != nil {
		return nil, err
	}
	r, ok := p.(provider.Runner)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "the plugin's provider does not say what its machines run")
	}
	runs, err := r.Runs(ctx)
	if err != nil {
		return nil, statusOf(err)
	}
	return &pb.PluginRunsResponse{Binary: runs.Binary, Image: runs.Image, Digest: runs.Digest}, nil
}
