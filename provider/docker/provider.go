package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/curatorproject/curator/provider"
)

// The labels the provider keeps its own bookkeeping in, beside the spec's.
// Every key under labelPrefix is the provider's: a spec may not use it.
const (
	labelPrefix = "curator.docker."
	// labelNetwork marks a container (or network) as made by a provider
	// on that network: the provider's scope.
	labelNetwork = labelPrefix + "network"
	// labelAddress is the node's IP:PORT, chosen before the container
	// started.
	labelAddress = labelPrefix + "address"
	// labelSpecKeys lists the keys of the spec's labels (a JSON array), as
	// a container also carries the labels of its image.
	labelSpecKeys = labelPrefix + "spec-labels"
	// labelDomain is the failure domain of a provider that is one engine
	// of several (Engines): its scope within the network's, should two
	// domains name one daemon.
	labelDomain = labelPrefix + "domain"
)

var (
	// ErrPoolExhausted is returned by Provision when every address of the
	// subnet is taken.
	ErrPoolExhausted = errors.New("address pool exhausted")
	// ErrInvalidID is returned for an ID that cannot be one of the
	// provider's containers.
	ErrInvalidID = errors.New("invalid instance id")
	// ErrInvalidSpec is returned by Provision for a spec it cannot run.
	ErrInvalidSpec = errors.New("invalid spec")
	// ErrNetworkMismatch is returned when the network exists but is not
	// the one the config describes (another subnet or driver).
	ErrNetworkMismatch = errors.New("network does not match the config")
)

// Provider runs instances as containers of one Docker daemon. Its methods
// may be called concurrently, and by several Providers on one network, in
// one process or several: the daemon is the only bookkeeping.
type Provider struct {
	cfg    Config
	docker *client.Client
	// domain is the failure domain of a Provider that is one engine of
	// several (Engines), "" alone: it names the containers
	// (NETWORK-DOMAIN-<hex>), labels them and scopes what it sees.
	domain string
	// managerBinds are bound into Spec.Manager containers beside the
	// socket of their own engine: the sockets of the other engines.
	managerBinds []string
}

var _ provider.Provider = (*Provider)(nil)

// New returns a Provider for cfg. It does not reach the daemon: the first
// call does (Ping says whether one answers).
func New(cfg Config) (*Provider, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("docker provider: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("docker provider: %w", err)
	}
	c, err := client.New(client.FromEnv, client.WithHost(cfg.Host))
	if err != nil {
		return nil, fmt.Errorf("docker provider: client for %s: %w", cfg.Host, err)
	}
	return &Provider{cfg: cfg, docker: c}, nil
}

// Close releases the client's connections to the daemon.
func (p *Provider) Close() error {
	return p.docker.Close()
}

// Ping says whether the daemon answers, and agrees on the API version with
// it.
func (p *Provider) Ping(ctx context.Context) error {
	if _, err := p.docker.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return fmt.Errorf("no Docker daemon at %s: %w", p.cfg.Host, err)
	}
	return nil
}

// ourFilter selects the provider's containers (and network): those labelled
// with its network.
func (p *Provider) ourFilter() client.Filters {
	f := make(client.Filters).Add("label", labelNetwork+"="+p.cfg.Network)
	if p.domain != "" {
		f.Add("label", labelDomain+"="+p.domain)
	}
	return f
}

// namePrefix starts the name of every container of the provider, before
// a dash and 8 hex digits: the network's name, then the domain's.
func (p *Provider) namePrefix() string {
	if p.domain != "" {
		return p.cfg.Network + "-" + p.domain
	}
	return p.cfg.Network
}

// ours says whether a container's labels say the provider made it.
func (p *Provider) ours(labels map[string]string) bool {
	return labels[labelNetwork] == p.cfg.Network && labels[labelDomain] == p.domain
}

// containerName is the name of a container from its summary (Docker lists
// names with a leading slash).
func containerName(c container.Summary) string {
	if len(c.Names) == 0 {
		return c.ID
	}
	return strings.TrimPrefix(c.Names[0], "/")
}

// instance is what the provider.Provider interface shows of container c:
// its name, the spec's labels and its address.
func (p *Provider) instance(c container.Summary) provider.Instance {
	return provider.Instance{ID: containerName(c), Labels: specLabels(c.Labels), Address: c.Labels[labelAddress], Created: time.Unix(c.Created, 0), Domain: p.domain}
}

// containerLabels returns the labels of a container for spec: the spec's
// own, and the provider's.
func (p *Provider) containerLabels(spec map[string]string, addr string) map[string]string {
	keys, _ := json.Marshal(slices.Sorted(maps.Keys(spec)))
	out := maps.Clone(spec)
	if out == nil {
		out = make(map[string]string)
	}
	out[labelNetwork] = p.cfg.Network
	out[labelAddress] = addr
	out[labelSpecKeys] = string(keys)
	if p.domain != "" {
		out[labelDomain] = p.domain
	}
	return out
}

// specLabels returns the spec's labels from a container's: not the
// provider's, nor those of the image.
func specLabels(labels map[string]string) map[string]string {
	var keys []string
	json.Unmarshal([]byte(labels[labelSpecKeys]), &keys) // none if unreadable
	var out map[string]string
	for _, k := range keys {
		if v, ok := labels[k]; ok && !strings.HasPrefix(k, labelPrefix) {
			if out == nil {
				out = make(map[string]string)
			}
			out[k] = v
		}
	}
	return out
}

// validID checks that id could name one of the provider's containers,
// which are named after its network (and domain): NETWORK-<hex>, or
// NETWORK-DOMAIN-<hex>.
func (p *Provider) validID(id string) error {
	rest, ok := strings.CutPrefix(id, p.namePrefix()+"-")
	if !ok || len(rest) != 2*idBytes || strings.Trim(rest, "0123456789abcdef") != "" {
		if p.domain != "" {
			return fmt.Errorf("%w: %q is not a container of network %s on engine %s", ErrInvalidID, id, p.cfg.Network, p.domain)
		}
		return fmt.Errorf("%w: %q is not a container of network %s", ErrInvalidID, id, p.cfg.Network)
	}
	return nil
}

var _ provider.Runner = (*Provider)(nil)

// Runs is the image the provider starts its containers from and the
// image's ID on the daemon now: a tag rebuilt in place is a new ID.
func (p *Provider) Runs(ctx context.Context) (provider.Runs, error) {
	img, err := p.docker.ImageInspect(ctx, p.cfg.Image)
	if err != nil {
		return provider.Runs{}, fmt.Errorf("image %s on the Docker daemon at %s: %w (make image builds it)", p.cfg.Image, p.cfg.Host, err)
	}
	return provider.Runs{Image: p.cfg.Image, Digest: img.ID}, nil
}
