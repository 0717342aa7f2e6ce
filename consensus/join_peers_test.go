package consensus

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/curatorproject/curator/pki"
)

// TestWaitPeersList asks a real etcd's peer API whether it lists a
// joining member: one just added as a learner is listed at once; one the
// peer does not know (as a peer whose view is behind would answer) is
// waited for until the deadline, and refused with the peer named.
func TestWaitPeersList(t *testing.T) {
	p := newTestPKI(t)
	nodes := p.newCluster(t, 1)
	cli := p.client(t, nodes...)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	ip := nextIP(t)
	port := freeBasePort(t, ip)
	self := PeerURL(ip, port)
	params, memberID, err := AddLearner(ctx, cli, "joiner", self)
	if err != nil {
		t.Fatal(err)
	}
	cert := p.tlsCert(t, p.etcd, pki.RoleConsensus)

	for _, tc := range []struct {
		name     string
		memberID uint64
		wantErr  string
	}{
		{"listed", memberID, ""},
		{"not listed", memberID + 1, "does not list this node's member"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := params
			j.MemberID = tc.memberID
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			err := waitPeersList(ctx, j, "joiner", self, cert, p.etcd.Cert, zap.NewNop())
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("waitPeersList: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), nodes[0].peerURL())):
				t.Fatalf("waitPeersList: %v, want an error that says %q and names %s", err, tc.wantErr, nodes[0].peerURL())
			}
		})
	}
}
