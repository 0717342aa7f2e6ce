package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"

	"google.golang.org/grpc/credentials"
)

// ErrSealed is the handshake a Captured client's credentials refuse once
// sealed.
var ErrSealed = errors.New("this connection is not dialled again: it was kept for one session, and the next dials its own")

// Captured is client credentials that keep the TLS state of their last
// handshake, so that its caller can sign the connection's keying
// material (a joining node's proof of its key, pki.BindingMaterial).
// Once sealed they make no more connections: a connection bound to what
// its first handshake was is never replaced by one that is not.
type Captured struct {
	credentials.TransportCredentials
	mu     sync.Mutex
	state  *tls.ConnectionState
	sealed bool
}

// Capture wraps creds, which must be TLS.
func Capture(creds credentials.TransportCredentials) *Captured {
	return &Captured{TransportCredentials: creds}
}

// ClientHandshake is creds' handshake, its state kept.
func (c *Captured) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	c.mu.Lock()
	sealed := c.sealed
	c.mu.Unlock()
	if sealed {
		raw.Close()
		return nil, nil, ErrSealed
	}
	conn, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err != nil {
		return conn, info, err
	}
	if ti, ok := info.(credentials.TLSInfo); ok {
		st := ti.State
		c.mu.Lock()
		c.state = &st
		c.mu.Unlock()
	}
	return conn, info, nil
}

// State is the TLS state of the last handshake, or nil.
func (c *Captured) State() *tls.ConnectionState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// Seal makes the credentials refuse every later handshake.
func (c *Captured) Seal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sealed = true
}

// Clone returns c itself: a clone must see the same handshakes.
func (c *Captured) Clone() credentials.TransportCredentials { return c }
