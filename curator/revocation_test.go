package curator

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
)

// operatorCert is a fresh admin certificate of the operator role, named
// name, and its serial as the curator writes it.
func (c *testCluster) operatorCert(name, role string) (tls.Certificate, string) {
	c.t.Helper()
	key, err := pki.NewKey()
	if err != nil {
		c.t.Fatal(err)
	}
	cert, err := c.root.Issue(pki.CertRequest{PublicKey: key.Public(), NodeID: name, Role: pki.RoleAdmin, OperatorRole: role})
	if err != nil {
		c.t.Fatal(err)
	}
	return pki.TLSCertificate(cert, key), cert.SerialNumber.Text(16)
}

// openStream is a management stream a test keeps open: what it received
// and how it ended.
type openStream struct {
	name string
	mu   sync.Mutex
	// reasons are the reasons of the test's events it got.
	reasons []string
	answers int
	err     error
	ended   time.Time
	done    chan struct{}
}

func (o *openStream) got(reasons ...string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.answers++
	o.reasons = append(o.reasons, reasons...)
}

func (o *openStream) answered() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.answers > 0
}

func (o *openStream) has(reason string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range o.reasons {
		if r == reason {
			return true
		}
	}
	return false
}

// watchEvents opens a WatchEvents on m and keeps receiving in the
// background until it ends.
func watchEvents(ctx context.Context, t *testing.T, name string, m pb.ManagementClient) *openStream {
	t.Helper()
	o := &openStream{name: name, done: make(chan struct{})}
	s, err := m.WatchEvents(ctx, &pb.WatchEventsRequest{})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	go func() {
		defer close(o.done)
		for {
			resp, err := s.Recv()
			if err != nil {
				o.mu.Lock()
				o.err, o.ended = err, time.Now()
				o.mu.Unlock()
				return
			}
			var reasons []string
			for _, ev := range resp.Events {
				if ev.Loop == "test" {
					reasons = append(reasons, ev.Reason)
				}
			}
			o.got(reasons...)
		}
	}()
	return o
}

// watchNodes opens a WatchNodes on m, as watchEvents.
func watchNodes(ctx context.Context, t *testing.T, name string, m pb.ManagementClient) *openStream {
	t.Helper()
	o := &openStream{name: name, done: make(chan struct{})}
	s, err := m.WatchNodes(ctx, &pb.WatchNodesRequest{})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	go func() {
		defer close(o.done)
		for {
			if _, err := s.Recv(); err != nil {
				o.mu.Lock()
				o.err, o.ended = err, time.Now()
				o.mu.Unlock()
				return
			}
			o.got()
		}
	}()
	return o
}

// TestRevocationEndsOpenStreams: an operator certificate's streams, open
// on the leader and through followers, end within a second of its
// revocation, with a status that names the certificate, and none of them
// delivers an event recorded after it; another certificate's stream stays
// open and gets that event; and every call, ended or not, leaves the
// managers' registry of open calls when it returns.
func TestRevocationEndsOpenStreams(t *testing.T) {
	c := newTestCluster(t)
	leader := c.startLeader()
	admin, anon := c.dialFirst()
	m2, _ := c.register(anon, c.token(admin, "manager"), "m2")
	m3, _ := c.register(anon, c.token(admin, "manager"), "m3")
	f2, _ := c.startCurator(m2, c.etcdClient())
	f3, _ := c.startCurator(m3, c.etcdClient())
	managers := []*Service{leader, f2, f3}

	revokedCert, serial := c.operatorCert("carol", pki.OperatorOperator)
	keptCert, _ := c.operatorCert("dave", pki.OperatorReader)
	client := func(addr string, cert tls.Certificate) pb.ManagementClient {
		return pb.NewManagementClient(dial(t, addr, &cert, c.root.Cert))
	}
	waitFor(t, "the followers forward", func() bool {
		for _, addr := range []string{m2.address, m3.address} {
			if _, err := client(addr, keptCert).ListNodes(callCtx(t), &pb.ListNodesRequest{}); err != nil {
				return false
			}
		}
		return true
	})

	ctx, cancel := context.WithCancel(callCtx(t))
	defer cancel()
	doomed := []*openStream{
		watchEvents(ctx, t, "events via the leader", client(c.first.address, revokedCert)),
		watchEvents(ctx, t, "events via follower m2", client(m2.address, revokedCert)),
		watchNodes(ctx, t, "nodes via follower m3", client(m3.address, revokedCert)),
		watchNodes(ctx, t, "nodes via the leader", client(c.first.address, revokedCert)),
	}
	kept := watchEvents(ctx, t, "another certificate's events via follower m2", client(m2.address, keptCert))
	for _, o := range append(doomed, kept) {
		waitFor(t, o.name+" answers", o.answered)
	}
	// Another certificate's calls on the managers that the streams
	// reached: the leader holds each stream (a forwarded one as a copy),
	// a follower those it forwards.
	waitFor(t, "the open calls are registered", func() bool {
		return leader.calls.count() == 5 && f2.calls.count() == 2 && f3.calls.count() == 1
	})

	if _, err := pb.NewManagementClient(admin).RevokeAdminCertificate(callCtx(t), &pb.RevokeAdminCertificateRequest{Cert: serial}); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	// An event recorded right after: no stream of the revoked
	// certificate may carry it.
	if err := store.EventRecord(callCtx(t), leader.currentLeader().Lead.Fence, &pb.Event{Time: leader.currentLeader().Events.Timestamp(), Loop: "test", Action: "tick", Reason: "after"}); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("certificate %s (carol) was revoked", serial)
	for _, o := range doomed {
		select {
		case <-o.done:
		case <-time.After(time.Second - time.Since(revoked)):
			t.Errorf("%s: still open a second after the revocation", o.name)
			continue
		}
		if took := o.ended.Sub(revoked); took > time.Second {
			t.Errorf("%s: ended %v after the revocation, want within a second", o.name, took)
		}
		if status.Code(o.err) != codes.PermissionDenied || !strings.Contains(o.err.Error(), want) {
			t.Errorf("%s ended with %v; want PermissionDenied saying %q", o.name, o.err, want)
		}
	}
	waitFor(t, "the other certificate's stream gets the event recorded after", func() bool { return kept.has("after") })
	for _, o := range doomed {
		if o.has("after") {
			t.Errorf("%s delivered an event recorded after the revocation", o.name)
		}
	}
	select {
	case <-kept.done:
		t.Fatalf("%s ended: %v", kept.name, kept.err)
	default:
	}
	// A new call of the revoked certificate is refused, on every manager.
	for _, addr := range []string{c.first.address, m2.address, m3.address} {
		_, err := client(addr, revokedCert).ListNodes(callCtx(t), &pb.ListNodesRequest{})
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), want) {
			t.Errorf("a new call via %s: %v; want PermissionDenied saying %q", addr, err, want)
		}
	}
	// Nothing leaks: the ended calls left the registry, and the one kept
	// open leaves it when it ends.
	waitFor(t, "only the kept stream is registered", func() bool {
		return leader.calls.count() == 1 && f2.calls.count() == 1 && f3.calls.count() == 0
	})
	cancel()
	<-kept.done
	waitFor(t, "no call is registered", func() bool {
		for _, m := range managers {
			if m.calls.count() != 0 {
				return false
			}
		}
		return true
	})
}

// TestOpenCalls: the registry of open calls, without etcd: a call of a
// revoked serial is ended with the revocation as its cause, one of
// another serial is not, one opened after is refused, and release
// deregisters.
func TestOpenCalls(t *testing.T) {
	o := newOpenCalls()
	a := identity{role: pki.RoleAdmin, opRole: pki.OperatorOperator, name: "carol", serial: "a1"}
	b := identity{role: pki.RoleAdmin, opRole: pki.OperatorReader, name: "dave", serial: "b2"}
	node := identity{role: pki.RoleNode, nodeID: "n1"}
	ctxA, releaseA, err := o.open(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	ctxB, releaseB, err := o.open(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	_, releaseNode, err := o.open(context.Background(), node)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseNode()
	if got := o.count(); got != 2 {
		t.Errorf("%d calls open, want 2 (a node's is not registered)", got)
	}
	if got := o.set("a1", true); got != 1 {
		t.Errorf("revoking a1 ended %d calls, want 1", got)
	}
	if err := revokedCause(ctxA); err == nil || !strings.Contains(err.Error(), "certificate a1 (carol) was revoked") {
		t.Errorf("the cause of a1's call: %v", context.Cause(ctxA))
	}
	if ctxB.Err() != nil {
		t.Errorf("b2's call ended: %v", context.Cause(ctxB))
	}
	if _, _, err := o.open(context.Background(), a); err == nil {
		t.Error("a call of a revoked serial was admitted")
	}
	releaseA()
	releaseB()
	if ctxB.Err() == nil || revokedCause(ctxB) != nil {
		t.Errorf("b2's call after release: %v, %v; want cancelled, not revoked", ctxB.Err(), context.Cause(ctxB))
	}
	if got := o.count(); got != 0 {
		t.Errorf("%d calls open after release, want 0", got)
	}
	// A record deleted (expired) forgets the serial, seen by the watch
	// or missing from a new listing.
	o.set("a1", false)
	if _, release, err := o.open(context.Background(), a); err != nil {
		t.Errorf("a1 after its record went: %v", err)
	} else {
		release()
	}
	o.set("a1", true)
	o.set("b2", true)
	o.forgetOthers(map[string]bool{"b2": true})
	if _, release, err := o.open(context.Background(), a); err != nil {
		t.Errorf("a1 after a listing without it: %v", err)
	} else {
		release()
	}
	if _, _, err := o.open(context.Background(), b); err == nil {
		t.Error("b2, listed revoked, was admitted")
	}
}

// TestRevokedStreamSendsNothingAfter: a stream the leader serves reads the
// revocation before each answer, so that an event recorded after it is
// never sent, even by a leader whose watch of the certificates lags (here
// it has none): the stream ends at that answer instead, with the status
// of the revocation.
func TestRevokedStreamSendsNothingAfter(t *testing.T) {
	c := newTestCluster(t)
	svc, err := New(c.curatorConfig(c.first, c.cli))
	if err != nil {
		t.Fatal(err)
	}
	svc.revocationWatch = func(ctx context.Context) error {
		supervisor.Signal(ctx, supervisor.Healthy)
		<-ctx.Done()
		return ctx.Err()
	}
	supervisor.TestHarness(t, svc.Run)
	waitFor(t, "the curator leads", svc.IsLeader)
	admin, _ := c.dialFirst()
	cert, serial := c.operatorCert("carol", pki.OperatorReader)
	ctx, cancel := context.WithCancel(callCtx(t))
	defer cancel()
	o := watchEvents(ctx, t, "events", pb.NewManagementClient(dial(t, c.first.address, &cert, c.root.Cert)))
	waitFor(t, "the stream answers", o.answered)
	if _, err := pb.NewManagementClient(admin).RevokeAdminCertificate(callCtx(t), &pb.RevokeAdminCertificateRequest{Cert: serial}); err != nil {
		t.Fatal(err)
	}
	st := svc.currentLeader()
	if err := store.EventRecord(callCtx(t), st.Lead.Fence, &pb.Event{Time: st.Events.Timestamp(), Loop: "test", Action: "tick", Reason: "after"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-o.done:
	case <-time.After(testTimeout):
		t.Fatal("the stream is still open")
	}
	if o.has("after") {
		t.Error("the stream delivered an event recorded after the revocation")
	}
	if want := fmt.Sprintf("certificate %s (carol) was revoked", serial); status.Code(o.err) != codes.PermissionDenied || !strings.Contains(o.err.Error(), want) {
		t.Errorf("the stream ended with %v; want PermissionDenied saying %q", o.err, want)
	}
}
