package transport

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/curatorproject/curator/pki/pkitest"
)

// countingListener counts the writes and reads of the connections it
// accepts: the system calls a server makes on them.
type countingListener struct {
	net.Listener
	writes, reads atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, l: l}, nil
}

type countingConn struct {
	net.Conn
	l *countingListener
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.l.writes.Add(1)
	return c.Conn.Write(p)
}

func (c *countingConn) Read(p []byte) (int, error) {
	c.l.reads.Add(1)
	return c.Conn.Read(p)
}

// TestFixedWindowsSendNoPings: a server and a client with the options of
// every curator connection, over TLS, a call every 20 ms (a heartbeat and
// its answer, a quiet spell between): the server writes each answer once
// and reads each call once (a few twice), no window update or PING of
// gRPC's link measurement between (with it, twice as many writes and
// reads).
func TestFixedWindowsSendNoPings(t *testing.T) {
	tt := pkitest.New(t)
	srv := grpc.NewServer(append(ServerOptions(), grpc.Creds(credentials.NewTLS(tt.Server)))...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := &countingListener{Listener: inner}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(inner.Addr().String(), DialOptions(credentials.NewTLS(tt.Client))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	cli := healthpb.NewHealthClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	call := func() {
		if _, err := cli.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	call() // the handshake, the settings
	time.Sleep(100 * time.Millisecond)
	writes, reads := lis.writes.Load(), lis.reads.Load()
	const calls = 30
	for range calls {
		time.Sleep(20 * time.Millisecond)
		call()
	}
	time.Sleep(100 * time.Millisecond)
	// On a busy host an answer's frames may go in two writes, a call's
	// come in two reads: up to half as many again are allowed.
	w, r := lis.writes.Load()-writes, lis.reads.Load()-reads
	if w > calls*3/2 || r > calls*3/2 {
		t.Errorf("%d calls cost the server %d writes and %d reads, want about one each a call", calls, w, r)
	}
	t.Logf("%d calls: %d writes, %d reads", calls, w, r)
}
