package curator

import (
	"crypto/tls"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	pb "github.com/curatorproject/curator/proto"
)

// TestHealthAndReflection: the standard health service and server
// reflection answer any certificate of the cluster over real TLS, and
// refuse a caller without one.
func TestHealthAndReflection(t *testing.T) {
	c := newTestCluster(t)
	c.startLeader()
	admin, anon := c.dialFirst()
	for _, tc := range []struct {
		name string
		cert func() *tls.Certificate
	}{
		{"admin", func() *tls.Certificate { cert := c.adminCert(); return &cert }},
		{"worker node", func() *tls.Certificate {
			w, _ := c.register(anon, c.token(admin, "worker"), "w1")
			return w.tlsCert()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := dial(t, c.first.address, tc.cert(), c.root.Cert)
			h := healthpb.NewHealthClient(conn)
			for _, svc := range []string{"", pb.Management_ServiceDesc.ServiceName, pb.Curator_ServiceDesc.ServiceName} {
				var got healthpb.HealthCheckResponse_ServingStatus
				waitFor(t, "the health of "+svc+" is SERVING", func() bool {
					resp, err := h.Check(callCtx(t), &healthpb.HealthCheckRequest{Service: svc})
					if err != nil {
						t.Fatalf("health check of %q: %v", svc, err)
					}
					got = resp.Status
					return got == healthpb.HealthCheckResponse_SERVING
				})
			}
			if got := listServices(t, conn); !slices.Contains(got, pb.Management_ServiceDesc.ServiceName) ||
				!slices.Contains(got, pb.Curator_ServiceDesc.ServiceName) || !slices.Contains(got, healthpb.Health_ServiceDesc.ServiceName) {
				t.Errorf("reflection lists %v, want the curator, management and health services", got)
			}
		})
	}

	t.Run("no certificate", func(t *testing.T) {
		_, err := healthpb.NewHealthClient(anon).Check(callCtx(t), &healthpb.HealthCheckRequest{})
		if got := status.Code(err); got != codes.PermissionDenied {
			t.Errorf("anonymous health check: %v, want PermissionDenied", err)
		}
		stream, err := reflectionpb.NewServerReflectionClient(anon).ServerReflectionInfo(callCtx(t))
		if err == nil {
			_ = stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
			_, err = stream.Recv()
		}
		if got := status.Code(err); got != codes.PermissionDenied {
			t.Errorf("anonymous reflection: %v, want PermissionDenied", err)
		}
	})
}

// listServices asks server reflection for the services, sorted.
func listServices(t *testing.T, conn *grpc.ClientConn) []string {
	t.Helper()
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(callCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("reflection: %v", err)
	}
	var out []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		out = append(out, s.Name)
	}
	slices.Sort(out)
	return out
}

func TestLocalMethod(t *testing.T) {
	got := map[string]bool{}
	for _, m := range []string{
		"/grpc.health.v1.Health/Check", "/grpc.health.v1.Health/Watch",
		"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
		"/curator.v1.Management/ListNodes", "/curator.v1.Curator/Heartbeat", "/grpc.health.v1.HealthX/Check",
	} {
		got[m] = localMethod(m)
	}
	want := map[string]bool{
		"/grpc.health.v1.Health/Check": true, "/grpc.health.v1.Health/Watch": true,
		"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo": true, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": true,
		"/curator.v1.Management/ListNodes": false, "/curator.v1.Curator/Heartbeat": false, "/grpc.health.v1.HealthX/Check": false,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("localMethod (-want +got):\n%s", diff)
	}
}
