package netfault

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// AbortConnections aborts (ss -K: the socket closed, a reset sent) the
// TCP connections of process pid but those spare keeps, and returns how
// many it aborted: those ss closed (it passes over in silence what the
// kernel would not close for it, without CAP_NET_ADMIN, and a connection
// that ended by itself meanwhile is none). A socket's cgroup is the one its process was in when
// it made the socket: a process moved into a Cgroup keeps its open
// connections outside FromCgroup's match until it makes them again.
func AbortConnections(pid int, spare func(local, remote netip.AddrPort) bool) (int, error) {
	inodes := map[string]bool{}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, err
	}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/tcp", pid))
	if err != nil {
		return 0, err
	}
	aborted := 0
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		// sl local remote st tx:rx tr:when retrnsmt uid timeout inode
		if len(f) < 10 || !inodes[f[9]] || f[3] == "0A" { // 0A: listening
			continue
		}
		local, err1 := procAddr(f[1])
		remote, err2 := procAddr(f[2])
		if err1 != nil || err2 != nil || spare(local, remote) {
			continue
		}
		filter := []string{"-H", "-K", "src", local.Addr().String(), "sport", "=", ":" + strconv.Itoa(int(local.Port())),
			"dst", remote.Addr().String(), "dport", "=", ":" + strconv.Itoa(int(remote.Port()))}
		out, err := exec.Command("ss", filter...).CombinedOutput()
		if err != nil {
			return aborted, fmt.Errorf("ss %s: %w: %s", strings.Join(filter, " "), err, out)
		}
		// ss -K prints the sockets it closed.
		if strings.TrimSpace(string(out)) != "" {
			aborted++
		}
	}
	return aborted, nil
}

// procAddr reads an IPv4 address and port of /proc/net/tcp
// ("0100007F:1F40": the address in the host's order, the port in hex).
func procAddr(s string) (netip.AddrPort, error) {
	ipHex, portHex, ok := strings.Cut(s, ":")
	raw, err := hex.DecodeString(ipHex)
	if !ok || err != nil || len(raw) != 4 {
		return netip.AddrPort{}, fmt.Errorf("address %q", s)
	}
	port, err := strconv.ParseUint(portHex, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("port %q", s)
	}
	var ip [4]byte
	binary.BigEndian.PutUint32(ip[:], binary.LittleEndian.Uint32(raw))
	return netip.AddrPortFrom(netip.AddrFrom4(ip), uint16(port)), nil
}
