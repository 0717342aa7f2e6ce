package node

import (
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/internal/nodeport"
)

// init, join and run check a node's four ports (internal/nodeport) before
// they write or start anything: a port in use found later leaves a
// half-made node that restarts etcd with backoff forever.

// ErrPortInUse: one of a node's ports is taken by another process.
var ErrPortInUse = nodeport.ErrInUse

// CheckPorts checks that this machine can listen on the four ports of a
// node at address (IP:PORT), and names the first one it cannot.
func CheckPorts(address string) error {
	ip, port, err := spec.SplitAddress(address)
	if err != nil {
		return err
	}
	return nodeport.Check(ip.String(), port)
}
