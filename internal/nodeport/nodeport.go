// Package nodeport is a node's port convention, in one place for the node,
// its etcd and the providers that place nodes: a node listens on four
// ports from the one it is given (PORT), gRPC at PORT, etcd peer at
// PORT+1, etcd client at PORT+2, HTTP (metrics, health) at PORT+3. A
// worker uses the etcd ports once it is promoted, so they are a worker's
// too.
package nodeport

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
)

// The offsets of a node's ports from PORT, and how many there are.
const (
	GRPC       = 0
	EtcdPeer   = 1
	EtcdClient = 2
	HTTP       = 3
	Count      = 4
)

// names name the ports by their offset from PORT, as errors say them.
var names = [Count]string{"gRPC, PORT", "etcd peer, PORT+1", "etcd client, PORT+2", "HTTP, PORT+3"}

// ErrInUse: one of a node's ports is taken by another process.
var ErrInUse = errors.New("port in use")

// Check checks that this machine can listen on the four ports of a node at
// ip (an IP address) and port, and names the first one it cannot:
// ErrInUse for one some process listens on.
func Check(ip string, port int) error {
	for off, what := range names {
		addr := net.JoinHostPort(ip, strconv.Itoa(port+off))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			if errors.Is(err, syscall.EADDRINUSE) {
				return fmt.Errorf("%w: %s (%s) is in use by another process", ErrInUse, addr, what)
			}
			return fmt.Errorf("cannot listen on %s (%s): %w (is %s an address of this machine?)", addr, what, err, ip)
		}
		ln.Close()
	}
	return nil
}
