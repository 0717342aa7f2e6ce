package docker

import (
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/curatorproject/curator/provider"
	"github.com/curatorproject/curator/provider/providertest"
)

// TestContract: the Docker provider meets the contract of every provider,
// its machines containers of the test image that run an agent's init.
// Its Provision has no window between making a machine and returning it
// that List could show: a container created and not started is not a
// machine (Prune removes it).
func TestContract(t *testing.T) {
	base := newTestProvider(t, nil)
	providertest.Contract(t, providertest.Harness{
		New: func(t *testing.T) provider.Provider {
			cfg := base.cfg
			cfg.Logger = zaptest.NewLogger(t)
			p, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			return p
		},
		Spec: func(labels map[string]string) provider.Spec {
			s := initSpec("contract")
			s.Labels = labels
			return s
		},
		Capacity: 4,
	})
}
