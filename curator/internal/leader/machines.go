package leader

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/provider"
	"github.com/curatorproject/curator/provider/docker"
	"github.com/curatorproject/curator/provider/plugin"
	"github.com/curatorproject/curator/provider/process"
)

// machines are the machines behind the groups, as a leadership makes and
// destroys them through each group's provider. It is the only part that
// calls Provision and Destroy (the layer test holds them to this file),
// and each checks the fence just before the call: a provider's call
// cannot be part of an etcd transaction, and a deposed leader makes and
// destroys nothing.
type machines struct {
	fence     *store.Fence
	lg        *zap.Logger
	providers groupProviders
}

// Provider returns the provider of group g, made from its spec (made
// anew when the spec's provider settings change).
func (m *machines) Provider(g *pb.Group) (provider.Provider, error) {
	return m.providers.get(g, m.lg)
}

// provision makes a machine of spec s through provider p, fenced. What
// the provider answers is a *providerRefusal: the group's failure, not
// the leadership's.
func (m *machines) provision(ctx context.Context, p provider.Provider, s provider.Spec) (provider.Instance, error) {
	if err := m.fence.Check(ctx); err != nil {
		return provider.Instance{}, err // not the leader any more: make nothing
	}
	inst, err := p.Provision(ctx, s)
	if err != nil {
		return provider.Instance{}, &providerRefusal{op: "provision", err: err}
	}
	return inst, nil
}

// destroy destroys machine id through provider p, fenced; the provider's
// error is a *providerRefusal.
func (m *machines) destroy(ctx context.Context, p provider.Provider, id string) error {
	if err := m.fence.Check(ctx); err != nil {
		return err
	}
	if err := p.Destroy(ctx, id); err != nil {
		return &providerRefusal{op: "destroy " + id, err: err}
	}
	return nil
}

// clearDead clears what dead machine id left (its dir), fenced; the
// provider's error is a *providerRefusal.
func (m *machines) clearDead(ctx context.Context, dk deadKeeper, id string) error {
	if err := m.fence.Check(ctx); err != nil {
		return err
	}
	if err := dk.ClearDead(ctx, id); err != nil {
		return &providerRefusal{op: "clear dead machine " + id, err: err}
	}
	return nil
}

// prune has provider pr clear what crashed provisions left, and returns
// the machines it cleared. It is not fenced, as it was not before these
// parts: it runs on every quiet tick of every group, and clears only what
// no machine runs from (see pruner).
func (m *machines) prune(ctx context.Context, pr pruner) ([]string, error) {
	return pr.Prune(ctx)
}

// providerRefusal is an error of a group's provider (a provision or a
// destroy it could not do): a failure of that group, not of the loop.
type providerRefusal struct {
	op  string
	err error
}

func (e *providerRefusal) Error() string { return e.op + ": " + e.err.Error() }
func (e *providerRefusal) Unwrap() error { return e.err }

// forget closes group name's provider (the group is gone).
func (m *machines) forget(name string) { m.providers.drop(name) }

// close closes every provider.
func (m *machines) close() { m.providers.close() }

// groupProviders keeps one provider per group, made from its spec and
// made anew when the spec's provider settings change.
type groupProviders struct {
	mu     sync.Mutex
	byName map[string]openProvider
}

type openProvider struct {
	spec *pb.ProviderSpec
	p    provider.Provider
}

// get returns the provider of group g.
func (gp *groupProviders) get(g *pb.Group, lg *zap.Logger) (provider.Provider, error) {
	gp.mu.Lock()
	defer gp.mu.Unlock()
	name := g.Spec.GetName()
	if op, ok := gp.byName[name]; ok && proto.Equal(op.spec, g.Spec.Provider) {
		return op.p, nil
	}
	p, err := newProvider(g.Spec.Provider, lg)
	if err != nil {
		return nil, fmt.Errorf("group %s: provider: %w", name, err)
	}
	if gp.byName == nil {
		gp.byName = map[string]openProvider{}
	}
	if old, ok := gp.byName[name]; ok {
		if c, ok := old.p.(io.Closer); ok {
			c.Close() // the spec's provider settings changed
		}
	}
	gp.byName[name] = openProvider{spec: g.Spec.Provider, p: p}
	return p, nil
}

// close closes every provider.
func (gp *groupProviders) close() {
	gp.mu.Lock()
	names := slices.Collect(maps.Keys(gp.byName))
	gp.mu.Unlock()
	for _, name := range names {
		gp.drop(name)
	}
}

// drop forgets group name's provider, closing it if it holds a
// connection (the docker provider's client to the daemon).
func (gp *groupProviders) drop(name string) {
	gp.mu.Lock()
	op, ok := gp.byName[name]
	delete(gp.byName, name)
	gp.mu.Unlock()
	if c, isCloser := op.p.(io.Closer); ok && isCloser {
		c.Close()
	}
}

// newProvider makes the provider a group's spec names.
func newProvider(spec *pb.ProviderSpec, lg *zap.Logger) (provider.Provider, error) {
	switch k := spec.GetKind().(type) {
	case *pb.ProviderSpec_Process:
		return processProvider(k.Process, lg)
	case *pb.ProviderSpec_Docker:
		return dockerProvider(k.Docker, lg)
	case *pb.ProviderSpec_Plugin:
		cfg, err := plugin.ConfigFor(k.Plugin.Path, k.Plugin.Config)
		if err != nil {
			return nil, err
		}
		cfg.Logger = lg
		return plugin.New(cfg)
	}
	return nil, errors.New("the spec names no provider")
}

// processProvider is the process provider of spec p: one pool of
// addresses, or a pool per failure domain.
func processProvider(p *pb.ProcessProviderSpec, lg *zap.Logger) (*process.Provider, error) {
	cfg := process.Config{Dir: p.Dir, Binary: p.Binary, Logger: lg}
	if len(p.Domains) == 0 {
		pool, err := process.PoolAddresses(p.Addresses, int(p.Port))
		if err != nil {
			return nil, err
		}
		cfg.Addresses = pool
	}
	for name, r := range p.Domains {
		pool, err := process.PoolAddresses(r, int(p.Port))
		if err != nil {
			return nil, fmt.Errorf("domain %s: %w", name, err)
		}
		if cfg.Domains == nil {
			cfg.Domains = map[string][]string{}
		}
		cfg.Domains[name] = pool
	}
	return process.New(cfg)
}

// dockerProvider is the docker provider of spec d: on the leader's own
// engine, or on d's engines, a failure domain each.
func dockerProvider(d *pb.DockerProviderSpec, lg *zap.Logger) (interface {
	provider.Provider
	provider.Runner
	io.Closer
}, error) {
	cfg := docker.Config{Network: d.Network, Subnet: d.Subnet, Image: d.Image, Port: int(d.Port), Logger: lg}
	if len(d.Engines) > 0 {
		cfg.Engines = map[string]docker.Engine{}
		for name, e := range d.Engines {
			cfg.Engines[name] = docker.Engine{Host: e.GetHost(), Subnet: e.GetSubnet()}
		}
	}
	return docker.Open(cfg)
}
