package curator

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
)

// BenchmarkListNodes lists a fleet of 10,000 node records, every page of
// it, through the management API of a real curator (TLS, gRPC, a
// one-member etcd), as `curator node ls` does: at the server's default
// page size and at the largest it allows, side by side. It reports the
// p50 and p99 of a whole listing against the goal (100 ms at p99).
//
//	go test -run '^$' -bench BenchmarkListNodes -benchtime 30x ./curator/
func BenchmarkListNodes(b *testing.B) {
	const fleet = 10000
	c := newTestCluster(b)
	svc := c.startLeader()
	st := svc.currentLeader()
	key, _ := newKey(b)
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		b.Fatal(err)
	}
	now := timestamppb.New(time.Now())
	base := netip.MustParseAddr("10.0.0.0")
	var batch []*pb.Node
	for i := range fleet {
		// Records as Register writes them (the key is one for all: only
		// its size matters here).
		batch = append(batch, &pb.Node{
			Id: fmt.Sprintf("sim%021d", i), Name: fmt.Sprintf("sim-%d", i),
			Address: netip.AddrPortFrom(base, uint16(10000+i)).String(),
			State:   pb.NodeState_NODE_STATE_UP, Roles: []pb.Role{pb.Role_ROLE_WORKER},
			Availability: pb.Availability_AVAILABILITY_ACTIVE, Status: pb.NodeStatus_NODE_STATUS_UNKNOWN,
			Version: "curator-bench", Created: now, Updated: now, StatusChanged: now, CertExpires: now,
			PublicKey: pub, Labels: map[string]string{}, JoinedAs: "worker",
		})
		if len(batch) == store.MaxNodesPerTxn || i == fleet-1 {
			if err := store.NodeJoinAll(b.Context(), st.Lead.Fence, batch); err != nil {
				b.Fatal(err)
			}
			batch = nil
		}
	}
	waitFor(b, "the registry holds the fleet", func() bool { return st.Reg.Count() > fleet })
	admin, _ := c.dialFirst()
	m := pb.NewManagementClient(admin)
	b.Run("one-node", func(b *testing.B) {
		for b.Loop() {
			ctx, cancel := context.WithTimeout(b.Context(), testTimeout)
			if _, err := m.ListNodes(ctx, &pb.ListNodesRequest{PageSize: 1}); err != nil {
				b.Fatal(err)
			}
			cancel()
		}
	})
	for _, size := range []uint32{0, MaxListPageSize} {
		b.Run(fmt.Sprintf("page-size-%d", size), func(b *testing.B) {
			var took []time.Duration
			for b.Loop() {
				t := time.Now()
				req := &pb.ListNodesRequest{PageSize: size}
				listed := 0
				for {
					ctx, cancel := context.WithTimeout(b.Context(), testTimeout)
					resp, err := m.ListNodes(ctx, req)
					cancel()
					if err != nil {
						b.Fatal(err)
					}
					listed += len(resp.Nodes)
					if resp.NextPageToken == "" {
						break
					}
					req.PageToken = resp.NextPageToken
				}
				took = append(took, time.Since(t))
				if listed != fleet+1 {
					b.Fatalf("listed %d nodes, want %d", listed, fleet+1)
				}
			}
			slices.Sort(took)
			p := func(q float64) float64 {
				return float64(took[min(len(took)-1, int(q*float64(len(took))))]) / float64(time.Millisecond)
			}
			b.ReportMetric(p(0.5), "p50-ms")
			b.ReportMetric(p(0.99), "p99-ms")
			b.ReportMetric(p(0.99)/100, "p99/goal")
		})
	}
}
