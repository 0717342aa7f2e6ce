//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package process

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/curatorproject/curator/provider"
)

var (
	// ErrPoolExhausted is returned by Provision when every address of the
	// pool belongs to a live instance.
	ErrPoolExhausted = errors.New("address pool exhausted")
	// ErrInvalidID is returned for an instance ID that cannot be one of
	// ours (empty, or not a plain name).
	ErrInvalidID = errors.New("invalid instance id")
	// ErrUnknownDomain is returned by Provision for a spec whose domain
	// is not one of Config.Domains.
	ErrUnknownDomain = errors.New("unknown failure domain")
)

// Provider runs instances as local processes. Its methods may be called
// concurrently, and by several Providers on one Dir, in one process or
// several.
type Provider struct {
	cfg Config
	// domains are Config.Domains' names, sorted; domainOf maps each of
	// their addresses to its domain.
	domains  []string
	domainOf map[string]string
}

var _ provider.Provider = (*Provider)(nil)

// New returns a Provider on cfg.Dir, creating the dir if need be. The
// instances already recorded there are its own from the start.
func New(cfg Config) (*Provider, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("process provider: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("process provider: %w", err)
	}
	p := &Provider{cfg: cfg, domains: slices.Sorted(maps.Keys(cfg.Domains)), domainOf: map[string]string{}}
	for d, pool := range cfg.Domains {
		for _, a := range pool {
			p.domainOf[a] = d
		}
	}
	if err := os.MkdirAll(p.instancesDir(), 0o700); err != nil {
		return nil, fmt.Errorf("process provider: %w", err)
	}
	return p, nil
}

// instance is what the provider.Provider interface shows of r: its
// domain is the one whose pool holds its address ("" for none).
func (p *Provider) instance(r record) provider.Instance {
	return provider.Instance{ID: r.ID, Labels: maps.Clone(r.Labels), Address: r.Address, Created: r.Created, Domain: p.domainOf[r.Address]}
}

var _ provider.Runner = (*Provider)(nil)

// Runs is the binary the provider starts its machines from and its
// content's digest, read now: a binary replaced in place is a new digest.
func (p *Provider) Runs(context.Context) (provider.Runs, error) {
	return BinaryRuns(p.cfg.Binary)
}

// BinaryRuns is what a provider of binary would run (Runs), without a
// provider: "" is the running executable, as Config.Binary's default.
func BinaryRuns(binary string) (provider.Runs, error) {
	cfg, err := Config{Binary: binary}.withDefaults()
	if err != nil {
		return provider.Runs{}, err
	}
	d, err := provider.FileDigest(cfg.Binary)
	if err != nil {
		return provider.Runs{}, fmt.Errorf("binary %s on the leader's host: %w", cfg.Binary, err)
	}
	return provider.Runs{Binary: cfg.Binary, Digest: d}, nil
}
