package transport

import (
	"errors"
	"net"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/credentials"
)

// Handshakes at fleet scale. When a manager dies, or the leader does,
// thousands of nodes connect again at once, each with a TLS handshake: a
// few milliseconds of CPU on the server's side. Run all at once, they
// fill the process's run queue, and the goroutines that must not wait
// (the embedded etcd's raft loop, the election lease's renewal, the
// accept loop) wait behind them: the lease goes in doubt, the new leader
// drops what it had, connections time out in the listen queue, and each
// retry adds a handshake. So a server runs at most a few handshakes at
// once per CPU; the others wait, parked, for a slot, and a connection that
// gets none within a bound is closed at once, which costs nothing and
// sends its node into its backoff instead of into the queue again.
//
// A slot is CPU, not a connection: a handshake holds one only while it
// has its client's bytes to work on, from the moment they arrive until
// it reads again. A handshake waiting for its client (the ClientHello
// not sent yet, the client's certificate flight on its way) holds none:
// when the clients are what is slow (a host whose nodes are all
// reconnecting at once), slots held by silent connections would leave
// the server idle and shed the clients that are ready.

// ErrHandshakeShed is the error of a server handshake not run because
// too many were running.
var ErrHandshakeShed = errors.New("too many TLS handshakes at once: connection closed, try again later")

// handshakeGate is server credentials that run at most cap(slots)
// handshakes at once.
type handshakeGate struct {
	credentials.TransportCredentials
	slots chan struct{}
	wait  time.Duration
	shed  func()
}

// LimitHandshakes returns creds that run at most slots server handshakes
// at once; a handshake whose client's first bytes wait longer than wait
// for a slot is closed and shed is called (for a metric; nil: none); a
// handshake under way waits up to continuedWaits times as long for its
// next. Client handshakes are not limited.
func LimitHandshakes(creds credentials.TransportCredentials, slots int, wait time.Duration, shed func()) credentials.TransportCredentials {
	if shed == nil {
		shed = func() {}
	}
	return &handshakeGate{TransportCredentials: creds, slots: make(chan struct{}, max(slots, 1)), wait: wait, shed: shed}
}

// continuedWaits: a handshake the server has put work into already waits
// this many times the bound for its next slot before it is given up.
const continuedWaits = 4

// acquire takes a slot within bound, or says it could not.
func (g *handshakeGate) acquire(bound time.Duration) bool {
	select {
	case g.slots <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case g.slots <- struct{}{}:
		return true
	case <-t.C:
		return false
	}
}

func (g *handshakeGate) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	gc := &gatedConn{Conn: c, gate: g}
	conn, info, err := g.TransportCredentials.ServerHandshake(gc)
	gc.handshaken()
	if err != nil && gc.shed {
		err = ErrHandshakeShed
	}
	return conn, info, err
}

// Clone keeps the slots: a clone shares the limit.
func (g *handshakeGate) Clone() credentials.TransportCredentials {
	return &handshakeGate{TransportCredentials: g.TransportCredentials.Clone(), slots: g.slots, wait: g.wait, shed: g.shed}
}

// gatedConn is a server connection during its handshake: each read gives
// the handshake's slot back while it waits for the client, and takes one
// again once the client's bytes are there. Once the handshake is over,
// reads pass through.
type gatedConn struct {
	net.Conn
	gate *handshakeGate
	// over: the handshake ended; reads pass through.
	over atomic.Bool
	// Only the handshake's goroutine uses these.
	held, started, shed bool
}

func (c *gatedConn) Read(p []byte) (int, error) {
	if c.over.Load() {
		return c.Conn.Read(p)
	}
	c.release()
	n, err := c.Conn.Read(p)
	if n == 0 {
		return n, err
	}
	bound := c.gate.wait
	if c.started {
		bound *= continuedWaits
	}
	if !c.gate.acquire(bound) {
		c.shed = true
		c.gate.shed()
		return 0, ErrHandshakeShed
	}
	c.held, c.started = true, true
	return n, err
}

// release gives the slot back, if held.
func (c *gatedConn) release() {
	if c.held {
		<-c.gate.slots
		c.held = false
	}
}

// handshaken ends the gating: the slot goes back, and reads pass through.
func (c *gatedConn) handshaken() {
	c.release()
	c.over.Store(true)
}
