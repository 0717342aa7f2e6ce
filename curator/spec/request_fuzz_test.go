package spec

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/curatorproject/curator/proto"
)

func u32(v uint32) *uint32 { return &v }

// FuzzManagementRequest: every management call's request, as proto bytes
// any client may send. CheckManagementRequest knows every request type;
// what it refuses is InvalidArgument with a readable message; what it
// accepts it accepts again after a round trip through the wire, and an
// accepted group spec is one describe and commit give back the same.
func FuzzManagementRequest(f *testing.F) {
	types := ManagementRequests()
	index := map[protoreflect.FullName]uint8{}
	for i, mt := range types {
		index[mt.Descriptor().FullName()] = uint8(i)
		f.Add(uint8(i), []byte{}) // each call's empty request
	}
	for _, req := range []proto.Message{
		&pb.ListNodesRequest{PageSize: 7, PageToken: "abc"},
		&pb.GetNodeRequest{Id: "worker-1"},
		&pb.NodeRequest{Id: " \t"},
		&pb.RemoveNodeRequest{Id: "x", Force: true},
		&pb.UpdateNodeRequest{Id: "n", Availability: pb.Availability_AVAILABILITY_DRAIN, LabelAdd: map[string]string{"tier": "web", "a/b": ""}, LabelRm: []string{"old"}},
		&pb.UpdateNodeRequest{Id: "n", Availability: 9, LabelAdd: map[string]string{"k": "v"}, LabelRm: []string{"k"}},
		&pb.UpdateNodeRequest{Id: "n", LabelAdd: map[string]string{"bad key": "x\ny"}},
		&pb.UpdateClusterRequest{MaxVoters: u32(0)},
		&pb.UpdateClusterRequest{MaxVoters: u32(5)},
		&pb.GetTokenRequest{Role: "worker"},
		&pb.RotateTokenRequest{Role: " Manager "},
		&pb.RotateTokenRequest{Role: "admin"},
		&pb.CommitGroupRequest{Spec: &pb.GroupSpec{Name: "w", Roles: []pb.Role{pb.Role_ROLE_WORKER}, Provider: &pb.ProviderSpec{Kind: &pb.ProviderSpec_Process{Process: &pb.ProcessProviderSpec{Addresses: "127.0.0.1-127.0.0.9", Dir: "/d"}}}}},
		&pb.GetGroupRequest{Name: "workers"},
		&pb.DestroyGroupRequest{Name: "-x"},
		&pb.GetRolloutRequest{Group: "managers"},
		&pb.ChangeRolloutRequest{Group: "w", Action: "pause"},
		&pb.ChangeRolloutRequest{Group: "w", Action: "cancel", TargetSha: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
		&pb.ChangeRolloutRequest{Group: "w", Action: "cancel", TargetSha: "0123456789ab\u00e9"},
		&pb.ListEventsRequest{Limit: 3},
		&pb.WatchEventsRequest{AfterRevision: -1},
		&pb.WatchEventsRequest{AfterRevision: 42, Backlog: 10},
	} {
		i, ok := index[req.ProtoReflect().Descriptor().FullName()]
		if !ok {
			f.Fatalf("%T is no management call's request", req)
		}
		data, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(i, data)
	}
	f.Fuzz(func(t *testing.T, call uint8, data []byte) {
		mt := types[int(call)%len(types)]
		req := mt.New().Interface()
		if proto.Unmarshal(data, req) != nil {
			return // grpc refuses it before any handler
		}
		name := string(mt.Descriptor().Name())
		err := CheckManagementRequest(req)
		if errors.Is(err, errUnknownRequest) {
			t.Fatalf("%s: %v", name, err)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("%s refused with %v, not ErrInvalid", name, err)
			}
			checkRefusal(t, name, err)
			return
		}
		wire, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
		if err != nil {
			t.Fatalf("%s: marshal an accepted request: %v", name, err)
		}
		again := mt.New().Interface()
		if err := proto.Unmarshal(wire, again); err != nil {
			t.Fatalf("%s: unmarshal an accepted request: %v", name, err)
		}
		if !proto.Equal(req, again) {
			t.Fatalf("%s changed on the wire: %v, then %v", name, req, again)
		}
		if err := CheckManagementRequest(again); err != nil {
			t.Fatalf("%s accepted, then refused after a round trip: %v", name, err)
		}
		if c, ok := req.(*pb.CommitGroupRequest); ok {
			spec := proto.Clone(c.Spec).(*pb.GroupSpec)
			NormalizeGroupSpec(spec)
			checkGroupRoundTrip(t, spec)
		}
	})
}
