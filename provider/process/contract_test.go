//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package process

import (
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/curatorproject/curator/provider"
	"github.com/curatorproject/curator/provider/providertest"
)

// TestContract: the process provider meets the contract of every
// provider. Its Provision can be interrupted between starting the process
// and recording its pid: the record says pid 0, and List adopts the
// process by its data dir.
func TestContract(t *testing.T) {
	dir := t.TempDir()
	addrs := []string{"127.0.100.30:7000", "127.0.100.31:7000", "127.0.100.32:7000", "127.0.100.33:7000", "127.0.100.34:7000", "127.0.100.35:7000"}
	providertest.Contract(t, providertest.Harness{
		New: func(t *testing.T) provider.Provider {
			p, err := New(Config{Dir: dir, Binary: sleeperBin, Addresses: addrs, Logger: zaptest.NewLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		Spec: func(labels map[string]string) provider.Spec {
			// The data dir last, as an agent's --data-dir, for the adoption.
			return provider.Spec{Labels: labels, Args: []string{"-out", "{{data-dir}}/out.json", "-listen", "{{address}}", "{{data-dir}}"}}
		},
		Capacity: len(addrs),
		Orphan: func(t *testing.T, pp provider.Provider, spec provider.Spec) string {
			p := pp.(*Provider)
			in := providertest.Provision(t, p, spec)
			readReport(t, p, in.ID)
			r, err := p.recordLoad(in.ID)
			if err != nil {
				t.Fatal(err)
			}
			r.PID, r.StartTime = 0, 0
			if err := p.recordSave(r); err != nil {
				t.Fatal(err)
			}
			return in.ID
		},
	})
}
