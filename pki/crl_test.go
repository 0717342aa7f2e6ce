package pki

import (
	"math/big"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCRLRoundTrip(t *testing.T) {
	root, err := NewCA("root")
	if err != nil {
		t.Fatal(err)
	}
	etcd, err := root.NewIntermediate("etcd")
	if err != nil {
		t.Fatal(err)
	}
	for _, serials := range [][]*big.Int{nil, {big.NewInt(7)}, {big.NewInt(7), big.NewInt(1 << 40)}} {
		der, err := etcd.NewCRL(serials, int64(len(serials)+1))
		if err != nil {
			t.Fatal(err)
		}
		n, got, err := ParseCRL(der, etcd.Cert)
		if err != nil {
			t.Fatal(err)
		}
		if n != int64(len(serials)+1) {
			t.Errorf("number %d, want %d", n, len(serials)+1)
		}
		if diff := cmp.Diff(serials, got, cmp.Comparer(func(a, b *big.Int) bool { return a.Cmp(b) == 0 })); diff != "" {
			t.Errorf("serials (-want +got):\n%s", diff)
		}
		if _, _, err := ParseCRL(der, root.Cert); err == nil {
			t.Error("a CRL of the etcd CA verified against the root")
		}
	}
	if _, _, err := ParseCRL([]byte("nope"), etcd.Cert); err == nil {
		t.Error("garbage parsed as a CRL")
	}
}
