package spec

import (
	"fmt"
	"net"
	"strconv"
)

// SplitAddress parses a node address, IP:PORT, with a literal IP (nodes on
// one host differ by loopback address) and a port that leaves room for the
// three ports after it.
func SplitAddress(addr string) (net.IP, int, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, 0, fmt.Errorf("address %q: want IP:PORT, for example 127.0.0.2:7000", addr)
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return nil, 0, fmt.Errorf("address %q: %q is not an IP address", addr, host)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535-3 {
		return nil, 0, fmt.Errorf("address %q: port must be a number from 1 to 65532 (the next three ports are etcd peer, etcd client and HTTP)", addr)
	}
	return ip, port, nil
}
