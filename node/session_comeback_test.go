package node

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/pki/pkitest"
	pb "github.com/curatorproject/curator/proto"
)

// pacingManager is a manager's node API that refuses the first refuse
// session set-ups with SESSIONS_PACED and a time to come back, then
// answers heartbeats; it counts the TCP connections it accepted and the
// set-ups it saw.
type pacingManager struct {
	pb.UnimplementedCuratorServer
	refuse   int32
	setUps   atomic.Int32
	accepted atomic.Int32
	addr     string
}

func (m *pacingManager) Heartbeat(stream grpc.BidiStreamingServer[pb.HeartbeatRequest, pb.HeartbeatResponse]) error {
	n := m.setUps.Add(1)
	req, err := stream.Recv()
	if err != nil {
		return err
	}
	if n <= m.refuse {
		st, err := status.New(codes.Unavailable, "this manager admits no more sessions right now").WithDetails(
			&errdetails.ErrorInfo{Reason: spec.SessionsPacedReason, Domain: spec.ErrorDomain},
			&errdetails.RetryInfo{RetryDelay: durationpb.New(50 * time.Millisecond)})
		if err != nil {
			return err
		}
		return st.Err()
	}
	for {
		if err := stream.Send(&pb.HeartbeatResponse{Seq: req.Seq}); err != nil {
			return err
		}
		if req, err = stream.Recv(); err != nil {
			return err
		}
	}
}

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	n *atomic.Int32
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// serveNodeAPI serves api over TLS (tt's server side) on loopback until the
// test ends, through wrap (nil: none), and returns its address.
func serveNodeAPI(t *testing.T, tt pkitest.TLS, api pb.CuratorServer, wrap func(net.Listener) net.Listener) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if wrap != nil {
		l = wrap(l)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(tt.Server)))
	pb.RegisterCuratorServer(srv, api)
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	return addr
}

// TestSessionComesBackWhereItWasPaced: a manager that refuses a set-up
// with a time to come back is tried again, on the connection already up,
// not the next manager with a handshake of its own; refused twice in a
// row, the node moves on.
func TestSessionComesBackWhereItWasPaced(t *testing.T) {
	tt := pkitest.New(t)
	serve := func(m *pacingManager) {
		m.addr = serveNodeAPI(t, tt, m, func(l net.Listener) net.Listener { return countingListener{l, &m.accepted} })
	}

	for _, tc := range []struct {
		name string
		// refusals of the first manager; the second never refuses.
		refuse int32
		// set-ups each manager sees until the node is answered.
		wantFirst, wantSecond int32
	}{
		{"paced once: back to the same manager", 1, 2, 0},
		{"paced twice: on to the next", 2, 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first, second := &pacingManager{refuse: tc.refuse}, &pacingManager{}
			serve(first)
			serve(second)
			answered := make(chan struct{})
			var once sync.Once
			s, err := NewSession(SessionConfig{
				TLS:      tt.Client,
				Interval: time.Second,
				Managers: func() []string { return []string{first.addr, second.addr} },
				OnAnswer: func(*pb.HeartbeatResponse, time.Time) { once.Do(func() { close(answered) }) },
			})
			if err != nil {
				t.Fatal(err)
			}
			// The first manager first.
			s.conns.next = 0
			runUntilAnswered(t, s, answered)
			if got := [2]int32{first.setUps.Load(), second.setUps.Load()}; got != [2]int32{tc.wantFirst, tc.wantSecond} {
				t.Errorf("set-ups seen by the two managers: %v, want [%d %d]", got, tc.wantFirst, tc.wantSecond)
			}
			if n := first.accepted.Load(); n != 1 {
				t.Errorf("the first manager accepted %d connections, want 1 (the set-ups after a refusal on the connection already up)", n)
			}
		})
	}
}

// TestJoinConnServesOneSession: the join's connection (SessionConfig.First)
// carries the first session, with no connection of the session's own;
// once that session ended, even paced with a time to come back, the next
// dials anew: the join's connection calls as the node only until its
// first certificate expires.
func TestJoinConnServesOneSession(t *testing.T) {
	tt := pkitest.New(t)
	m := &pacingManager{refuse: 1}
	m.addr = serveNodeAPI(t, tt, m, func(l net.Listener) net.Listener { return countingListener{l, &m.accepted} })
	jc, err := grpc.NewClient(m.addr, grpc.WithTransportCredentials(credentials.NewTLS(tt.Client)))
	if err != nil {
		t.Fatal(err)
	}
	answered := make(chan struct{})
	var once sync.Once
	s, err := NewSession(SessionConfig{
		TLS:      tt.Client,
		Interval: time.Second,
		Managers: func() []string { return []string{m.addr} },
		OnAnswer: func(*pb.HeartbeatResponse, time.Time) { once.Do(func() { close(answered) }) },
		First:    &JoinConn{Manager: m.addr, conn: jc},
	})
	if err != nil {
		t.Fatal(err)
	}
	runUntilAnswered(t, s, answered)
	if got := m.setUps.Load(); got != 2 {
		t.Errorf("%d set-ups, want 2 (paced once, then answered)", got)
	}
	if got := m.accepted.Load(); got != 2 {
		t.Errorf("%d connections accepted, want 2: the join's for the first session, a new one after it", got)
	}
	if st := jc.GetState(); st != connectivity.Shutdown {
		t.Errorf("the join's connection is %v after its session, want closed", st)
	}
}

// runUntilAnswered runs s until answered is closed (within 10 s), then
// stops and closes it.
func runUntilAnswered(t *testing.T, s *Session, answered <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		<-done
		s.Close()
	}()
	select {
	case <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("no answer within 10 s")
	}
}
