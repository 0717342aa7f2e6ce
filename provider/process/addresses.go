package process

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// maxRangeLength is more than the longest FIRST-LAST, with room for
// spaces around the '-'.
const maxRangeLength = 64

// AddressRange parses FIRST-LAST (two IPv4 addresses, FIRST <= LAST), as
// `curator dev --addresses` and curator-bench take them, and returns its
// first n addresses: nodes on one host differ by loopback address.
func AddressRange(s string, n int) ([]netip.Addr, error) {
	if len(s) > maxRangeLength {
		// Not parsed, so that no error quotes a huge value.
		return nil, fmt.Errorf("want FIRST-LAST, for example 127.0.100.10-127.0.100.250, not %d bytes", len(s))
	}
	firstS, lastS, ok := strings.Cut(s, "-")
	if !ok {
		return nil, errors.New("want FIRST-LAST, for example 127.0.100.10-127.0.100.250")
	}
	first, err := netip.ParseAddr(strings.TrimSpace(firstS))
	if err != nil || !first.Is4() {
		return nil, fmt.Errorf("first address %q is not an IPv4 address", firstS)
	}
	last, err := netip.ParseAddr(strings.TrimSpace(lastS))
	if err != nil || !last.Is4() {
		return nil, fmt.Errorf("last address %q is not an IPv4 address", lastS)
	}
	if last.Less(first) {
		return nil, fmt.Errorf("first address %s comes after last address %s", first, last)
	}
	var out []netip.Addr
	for a := first; len(out) < n; a = a.Next() {
		out = append(out, a)
		if a == last && len(out) < n {
			return nil, fmt.Errorf("holds %d addresses, %d nodes need %d", len(out), n, n)
		}
	}
	return out, nil
}

// RangeBounds returns the first and last addresses of the range
// FIRST-LAST, checked as AddressRange checks it.
func RangeBounds(s string) (first, last netip.Addr, err error) {
	a, err := AddressRange(s, 1)
	if err != nil {
		return first, last, err
	}
	_, lastS, _ := strings.Cut(s, "-")
	return a[0], netip.MustParseAddr(strings.TrimSpace(lastS)), nil
}

// maxPool bounds the pool that PoolAddresses makes of a range.
const maxPool = 1 << 16

// PoolAddresses returns every address of the range FIRST-LAST with port,
// as IP:PORT: the pool of a group's process provider.
func PoolAddresses(s string, port int) ([]string, error) {
	first, last, err := RangeBounds(s)
	if err != nil {
		return nil, err
	}
	var out []string
	for a := first; ; a = a.Next() {
		out = append(out, netip.AddrPortFrom(a, uint16(port)).String())
		if a == last {
			return out, nil
		}
		if len(out) == maxPool {
			return nil, fmt.Errorf("more than %d addresses: give a smaller range", maxPool)
		}
	}
}

// SplitRange splits the range FIRST-LAST into n consecutive ranges of
// one address or more, as equal as can be (the first ones one address
// longer when they cannot be): `curator dev --domains` gives each
// failure domain one.
func SplitRange(s string, n int) ([]string, error) {
	first, last, err := RangeBounds(s)
	if err != nil {
		return nil, err
	}
	lo, hi := addrUint(first), addrUint(last)
	total := uint64(hi) - uint64(lo) + 1
	if n < 1 || uint64(n) > total {
		return nil, fmt.Errorf("%d addresses cannot be split into %d ranges", total, n)
	}
	out := make([]string, 0, n)
	next := uint64(lo)
	for i := range uint64(n) {
		size := total / uint64(n)
		if i < total%uint64(n) {
			size++
		}
		out = append(out, fmt.Sprintf("%s-%s", uintAddr(uint32(next)), uintAddr(uint32(next+size-1))))
		next += size
	}
	return out, nil
}

func addrUint(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

func uintAddr(u uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], u)
	return netip.AddrFrom4(b)
}
