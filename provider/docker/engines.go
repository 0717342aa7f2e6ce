package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/curatorproject/curator/provider"
)

// Engines is the provider.Provider of one group's machines on several
// Docker engines, each engine a failure domain of its own (Config.Engines:
// a domain's name and the engine's host and subnet). It is a Provider per
// engine, with the domain in its containers' names and labels:
//
//	container name   NETWORK-DOMAIN-<8 hex digits>: the instance ID, so
//	                 that Destroy finds the engine by the ID alone
//	container labels the Provider's, and the domain
//	network          NETWORK on each engine, with the engine's subnet;
//	                 the engines' hosts route between the subnets
//
// A machine is made on the engine Spec.Domain names. List asks every
// engine at once, each for Config.ListTimeout at most (SuspectTimeout
// for one that failed the last list, until it answers): when some answer
// and others do not, it returns what it listed with a
// *provider.UnreachableError naming the others, so that a dark engine is
// never taken for machines gone; when none answers, an error alone.
//
// A Spec.Manager machine (a curator, which as leader makes machines on
// every engine) has the unix sockets of every engine bound into its
// container at the same paths, so the group's spec names them there as
// on the host.
type Engines struct {
	cfg     Config
	domains []string // sorted
	engines map[string]*Provider

	mu sync.Mutex
	// failed is when each engine last failed a list: until it answers
	// again, it is asked with SuspectTimeout only, so that a dark engine
	// does not make every list of the group (the group loop's, an
	// operator's `group ls`) wait ListTimeout.
	failed map[string]time.Time
}

// SuspectTimeout is how long an engine that failed its last list is
// waited for by the next: a live engine on the leader's network answers
// in a few milliseconds.
const SuspectTimeout = 500 * time.Millisecond

// timeout is how long a call to domain d's engine may take.
func (e *Engines) timeout(d string) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.failed[d]; ok {
		return min(SuspectTimeout, e.cfg.ListTimeout)
	}
	return e.cfg.ListTimeout
}

// answered notes whether domain d's engine answered.
func (e *Engines) answered(d string, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err == nil {
		delete(e.failed, d)
		return
	}
	if e.failed == nil {
		e.failed = map[string]time.Time{}
	}
	e.failed[d] = time.Now()
}

var (
	_ provider.Provider  = (*Engines)(nil)
	_ provider.LastWords = (*Engines)(nil)
	_ provider.Runner    = (*Engines)(nil)
)

// NewEngines returns the provider of cfg.Engines (at least one). Like New,
// it reaches no engine.
func NewEngines(cfg Config) (*Engines, error) {
	if len(cfg.Engines) == 0 {
		return nil, errors.New("docker provider: no engines")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("docker provider: %w", err)
	}
	e := &Engines{cfg: cfg, domains: slices.Sorted(maps.Keys(cfg.Engines)), engines: map[string]*Provider{}}
	var binds []string
	hosts := map[string]string{}
	for _, d := range e.domains {
		eng := cfg.Engines[d]
		if err := validName(d); err != nil {
			return nil, fmt.Errorf("docker provider: engine: %w", err)
		}
		if other, dup := hosts[eng.Host]; dup {
			return nil, fmt.Errorf("docker provider: engines %s and %s are one engine, %s: each domain needs its own", other, d, eng.Host)
		}
		hosts[eng.Host] = d
		if path, ok := strings.CutPrefix(eng.Host, "unix://"); ok {
			binds = append(binds, path+":"+path)
		}
	}
	for _, d := range e.domains {
		eng := cfg.Engines[d]
		one := cfg
		one.Engines = nil
		one.Host, one.ManagerSocket = eng.Host, ""
		if eng.Subnet != "" {
			one.Subnet = eng.Subnet
		}
		p, err := New(one)
		if err != nil {
			e.Close()
			return nil, fmt.Errorf("engine %s: %w", d, err)
		}
		p.domain, p.managerBinds = d, binds
		e.engines[d] = p
	}
	return e, nil
}

// Domains returns the engines' domains, sorted.
func (e *Engines) Domains() []string { return slices.Clone(e.domains) }

// Engine returns the Provider of domain d's engine, nil if there is none.
func (e *Engines) Engine(d string) *Provider { return e.engines[d] }

// Close closes every engine's client.
func (e *Engines) Close() error {
	var errs []error
	for _, p := range e.engines {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}

// Ping says whether every engine answers.
func (e *Engines) Ping(ctx context.Context) error {
	var errs []error
	for _, d := range e.domains {
		if err := e.engines[d].Ping(ctx); err != nil {
			errs = append(errs, fmt.Errorf("engine %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// Provision makes a machine of spec on the engine of spec.Domain.
func (e *Engines) Provision(ctx context.Context, spec provider.Spec) (provider.Instance, error) {
	p := e.engines[spec.Domain]
	if p == nil {
		return provider.Instance{}, fmt.Errorf("provision: %w: domain %q is not one of the engines (%s)", ErrInvalidSpec, spec.Domain, strings.Join(e.domains, ", "))
	}
	return p.Provision(ctx, spec)
}

// engineOf returns the engine whose container id names.
func (e *Engines) engineOf(id string) (*Provider, error) {
	for _, d := range e.domains {
		if p := e.engines[d]; p.validID(id) == nil {
			return p, nil
		}
	}
	return nil, fmt.Errorf("%w: %q is not a container of network %s on any engine (%s)", ErrInvalidID, id, e.cfg.Network, strings.Join(e.domains, ", "))
}

// Destroy destroys machine id on its engine, found by its name.
func (e *Engines) Destroy(ctx context.Context, id string) error {
	p, err := e.engineOf(id)
	if err != nil {
		return fmt.Errorf("destroy: %w", err)
	}
	return p.Destroy(ctx, id)
}

// List lists the running machines of every engine whose labels match
// selector, sorted by ID; see Engines for an engine that does not answer.
func (e *Engines) List(ctx context.Context, selector map[string]string) ([]provider.Instance, error) {
	return e.each(ctx, "list", func(ctx context.Context, p *Provider) ([]provider.Instance, error) { return p.List(ctx, selector) })
}

// ListDead lists the dead machines of every engine (Provider.ListDead), as
// List does.
func (e *Engines) ListDead(ctx context.Context, selector map[string]string) ([]provider.Instance, error) {
	return e.each(ctx, "list dead", func(ctx context.Context, p *Provider) ([]provider.Instance, error) {
		return p.ListDead(ctx, selector)
	})
}

// ClearDead clears dead machine id on its engine.
func (e *Engines) ClearDead(ctx context.Context, id string) error {
	p, err := e.engineOf(id)
	if err != nil {
		return fmt.Errorf("clear dead: %w", err)
	}
	return p.ClearDead(ctx, id)
}

// LastWords returns machine id's last words, from its engine.
func (e *Engines) LastWords(ctx context.Context, id string) (string, error) {
	p, err := e.engineOf(id)
	if err != nil {
		return "", fmt.Errorf("last words: %w", err)
	}
	return p.LastWords(ctx, id)
}

// Prune prunes every engine that answers (Provider.Prune), each for
// Config.ListTimeout at most.
func (e *Engines) Prune(ctx context.Context) ([]string, error) {
	var pruned []string
	var errs []error
	for _, d := range e.domains {
		pctx, cancel := context.WithTimeout(ctx, e.timeout(d))
		ids, err := e.engines[d].Prune(pctx)
		cancel()
		pruned = append(pruned, ids...)
		if err != nil {
			errs = append(errs, fmt.Errorf("engine %s: %w", d, err))
		}
	}
	slices.Sort(pruned)
	return pruned, errors.Join(errs...)
}

// Runs is the image the engines run and its ID (each engine asked for
// Config.ListTimeout at most), which every engine that answers must hold
// the same (one image loaded on each, `docker save |
// docker load`): the machines of a config run one thing whatever their
// engine, and a dark engine changes nothing of what the group runs.
func (e *Engines) Runs(ctx context.Context) (provider.Runs, error) {
	var runs provider.Runs
	var errs []error
	by := ""
	for _, d := range e.domains {
		rctx, cancel := context.WithTimeout(ctx, e.timeout(d))
		r, err := e.engines[d].Runs(rctx)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("engine %s: %w", d, err))
			continue
		}
		if by != "" && r.Digest != runs.Digest {
			return provider.Runs{}, fmt.Errorf("image %s is %s on engine %s but %s on engine %s: load the same image on every engine (docker save | docker load)", e.cfg.Image, runs.Digest, by, r.Digest, d)
		}
		runs, by = r, d
	}
	if by == "" {
		return provider.Runs{}, errors.Join(errs...)
	}
	return runs, nil
}

// each runs fn on every engine at once, each for Config.ListTimeout at
// most, and gathers what they listed, sorted by ID: with the domains that
// did not answer in a *provider.UnreachableError beside it, or an error
// alone when none did.
func (e *Engines) each(ctx context.Context, what string, fn func(context.Context, *Provider) ([]provider.Instance, error)) ([]provider.Instance, error) {
	lists := make([][]provider.Instance, len(e.domains))
	errs := make([]error, len(e.domains))
	var wg sync.WaitGroup
	for i, d := range e.domains {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, e.timeout(d))
			defer cancel()
			lists[i], errs[i] = fn(cctx, e.engines[d])
			if ctx.Err() == nil {
				e.answered(d, errs[i])
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var out []provider.Instance
	unreachable := map[string]error{}
	for i, d := range e.domains {
		if errs[i] != nil {
			unreachable[d] = errs[i]
			continue
		}
		out = append(out, lists[i]...)
	}
	slices.SortFunc(out, func(a, b provider.Instance) int { return strings.Compare(a.ID, b.ID) })
	switch {
	case len(unreachable) == 0:
		return out, nil
	case len(unreachable) == len(e.domains):
		// Nothing known: not an UnreachableError, whose list is taken
		// for the rest of the machines.
		return nil, fmt.Errorf("%s: no engine answers: %s", what, (&provider.UnreachableError{Domains: unreachable}).Error())
	}
	return out, &provider.UnreachableError{Domains: unreachable}
}

// BuildImage builds Config.Image from binary and extra on the first
// engine (Provider.BuildImage) and loads that image onto every other, so
// that every engine holds it by the same ID (see Runs). It returns the ID.
func (e *Engines) BuildImage(ctx context.Context, binary string, labels map[string]string, extra ...ImageFile) (string, error) {
	first := e.engines[e.domains[0]]
	id, err := first.BuildImage(ctx, binary, labels, extra...)
	if err != nil {
		return "", fmt.Errorf("engine %s: %w", e.domains[0], err)
	}
	for _, d := range e.domains[1:] {
		if err := first.copyImage(ctx, e.engines[d]); err != nil {
			return "", fmt.Errorf("engine %s: %w", d, err)
		}
	}
	return id, nil
}

// Open is the provider cfg names: on several engines (NewEngines) when it
// names any, else on one (New). The leader's built-in provider and the
// docker plugin both open theirs here.
func Open(cfg Config) (interface {
	provider.Provider
	provider.Runner
	io.Closer
}, error) {
	if len(cfg.Engines) > 0 {
		return NewEngines(cfg)
	}
	return New(cfg)
}
