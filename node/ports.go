package node

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"

	"github.com/curatorproject/curator/curator"
)

// A node listens on four ports from the one it is given: gRPC at PORT, etcd
// peer at PORT+1, etcd client at PORT+2, HTTP at PORT+3 (a worker uses the
// etcd ports once it is promoted). init, join and run check all four before
// they write or start anything: a port in use found later leaves a
// half-made node that restarts etcd with backoff forever.

// ErrPortInUse: one of a node's ports is taken by another process.
var ErrPortInUse = errors.New("port in use")

// nodePorts names the ports by their offset from PORT.
var nodePorts = []string{"gRPC, PORT", "etcd peer, PORT+1", "etcd client, PORT+2", "HTTP, PORT+3"}

// CheckPorts checks that this machine can listen on the four ports of a
// node at address (IP:PORT), and names the first one it cannot.
func CheckPorts(address string) error {
	ip, port, err := curator.SplitAddress(address)
	if err != nil {
		return err
	}
	for off, what := range nodePorts {
		addr := net.JoinHostPort(ip.String(), strconv.Itoa(port+off))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			if errors.Is(err, syscall.EADDRINUSE) {
				return fmt.Errorf("%w: %s (%s) is in use by another process", ErrPortInUse, addr, what)
			}
			return fmt.Errorf("cannot listen on %s (%s): %w (is %s an address of this machine?)", addr, what, err, ip)
		}
		ln.Close()
	}
	return nil
}
