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
	addrs := []string{"127.0.100.30:7000", "127.0.100.31:7000", "127.0.100.32:7000", "127.0.100.33:7000", "127.0.100.34:7000", "127.0.100.35:7000"}
	providertest.Contract(t, contractHarness(t, Config{Addresses: addrs}, len(addrs)))
}

// TestContractDomains: with a pool per failure domain, the provider meets
// the contract too, the domains' included: a machine is made from its
// domain's pool and listed in it.
func TestContractDomains(t *testing.T) {
	domains := map[string][]string{
		"a": {"127.0.183.10:7000", "127.0.183.11:7000", "127.0.183.12:7000"},
		"b": {"127.0.183.20:7000", "127.0.183.21:7000", "127.0.183.22:7000"},
	}
	h := contractHarness(t, Config{Domains: domains}, 6)
	h.Domains = []string{"a", "b"}
	providertest.Contract(t, h)
}

// contractHarness is the contract's harness on a provider of cfg (Dir,
// Binary and Logger set here) with room for capacity machines.
func contractHarness(t *testing.T, cfg Config, capacity int) providertest.Harness {
	cfg.Dir, cfg.Binary = t.TempDir(), sleeperBin
	return providertest.Harness{
		New: func(t *testing.T) provider.Provider {
			cfg := cfg
			cfg.Logger = zaptest.NewLogger(t)
			p, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		Spec: func(labels map[string]string) provider.Spec {
			// The data dir last, as an agent's --data-dir, for the adoption.
			return provider.Spec{Labels: labels, Args: []string{"-out", "{{data-dir}}/out.json", "-listen", "{{address}}", "{{data-dir}}"}}
		},
		Capacity: capacity,
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
	}
}
