package plugin

import (
	"maps"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/provider"
)

func specToProto(s provider.Spec) *pb.PluginSpec {
	return &pb.PluginSpec{Labels: s.Labels, Args: s.Args, Env: s.Env, Manager: s.Manager, Domain: s.Domain}
}

func specFromProto(s *pb.PluginSpec) provider.Spec {
	return provider.Spec{Labels: maps.Clone(s.GetLabels()), Args: s.GetArgs(), Env: maps.Clone(s.GetEnv()), Manager: s.GetManager(), Domain: s.GetDomain()}
}

func instanceToProto(in provider.Instance) *pb.PluginInstance {
	out := &pb.PluginInstance{Id: in.ID, Labels: in.Labels, Address: in.Address, Domain: in.Domain}
	if !in.Created.IsZero() {
		out.Created = timestamppb.New(in.Created)
	}
	return out
}

func instanceFromProto(in *pb.PluginInstance) provider.Instance {
	out := provider.Instance{ID: in.GetId(), Labels: maps.Clone(in.GetLabels()), Address: in.GetAddress(), Domain: in.GetDomain()}
	if in.Created != nil {
		out.Created = in.Created.AsTime()
	}
	return out
}
