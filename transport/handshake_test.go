package transport

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/curatorproject/curator/pki/pkitest"
)

// TestLimitHandshakes: a real gRPC server over TLS with one handshake slot.
// Connections whose clients are silent (no ClientHello yet) or slow (their
// second flight late) hold no slot: clients get through meanwhile. With
// the slot taken by a handshake at work, a client is closed after the wait
// (counted, and told so at once, not at its own timeout); once the slot
// is free a client gets through.
func TestLimitHandshakes(t *testing.T) {
	tt := pkitest.New(t)

	var shed atomic.Int64
	const wait = 200 * time.Millisecond
	creds := LimitHandshakes(credentials.NewTLS(tt.Server), 1, wait, func() { shed.Add(1) })
	srv := grpc.NewServer(grpc.Creds(creds))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)

	check := func(opts ...grpc.DialOption) (time.Duration, error) {
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(tt.Client)))
		conn, err := grpc.NewClient(lis.Addr().String(), opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(false))
		return time.Since(start), err
	}
	if _, err := check(); err != nil {
		t.Fatalf("a client with the slot free: %v", err)
	}

	// A connection that says nothing: its handshake waits for a
	// ClientHello, and holds no slot meanwhile.
	stall, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer stall.Close()
	time.Sleep(2 * wait)
	if took, err := check(); err != nil {
		t.Errorf("a client while a silent connection waits for its handshake: %v after %v", err, took)
	}

	// A client whose second flight (its certificate, its Finished) comes
	// 2 s late: its handshake waits for it holding no slot, and a client
	// gets through meanwhile; the slow one gets through too.
	gate := creds.(*handshakeGate)
	slow := make(chan error, 1)
	go func() {
		_, err := check(grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			return &lateConn{Conn: c, lateAfter: 1, late: 2 * time.Second}, err
		}))
		slow <- err
	}()
	time.Sleep(4 * wait)
	if took, err := check(); err != nil || took > 3*time.Second/2 {
		t.Errorf("a client while a slow one is half-way through its handshake: %v after %v, want through at once", err, took)
	}
	if err := <-slow; err != nil {
		t.Errorf("the slow client: %v", err)
	}
	if n := shed.Load(); n != 0 {
		t.Errorf("%d handshakes shed while none was at work", n)
	}

	// The slot held by a handshake at work: a client is closed after
	// the wait.
	gate.slots <- struct{}{}
	took, err := check()
	if status.Code(err) != codes.Unavailable || took > 3*time.Second {
		t.Errorf("a client while the slot is held: %v after %v, want Unavailable soon after %v", err, took, wait)
	}
	if shed.Load() == 0 {
		t.Errorf("no handshake counted as shed")
	}

	<-gate.slots
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err = check(); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Errorf("a client once the slot is free again: %v", err)
	}
}

// lateConn holds every write after the first lateAfter ones back by late,
// the first time: a client slow to send its next flight.
type lateConn struct {
	net.Conn
	lateAfter, writes int
	late              time.Duration
}

func (c *lateConn) Write(p []byte) (int, error) {
	c.writes++
	if c.writes == c.lateAfter+1 {
		time.Sleep(c.late)
	}
	return c.Conn.Write(p)
}
