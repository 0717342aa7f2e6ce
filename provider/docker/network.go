package docker

import (
	"context"
	"fmt"
	"net/netip"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"go.uber.org/zap"
)

// gateway is the address of the network's bridge on the host: the first
// of the subnet. The nodes get the addresses after it.
func gateway(subnet netip.Prefix) netip.Addr {
	return subnet.Addr().Next()
}

// ensureNetwork makes the network if it is missing and checks that it is
// a bridge with the configured subnet. Two leaders may make it at once:
// Docker refuses the second (the name is taken), which then finds the
// first's.
func (p *Provider) ensureNetwork(ctx context.Context) error {
	subnet, err := p.cfg.subnet()
	if err != nil {
		return err
	}
	n, err := p.docker.NetworkInspect(ctx, p.cfg.Network, client.NetworkInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		_, err = p.docker.NetworkCreate(ctx, p.cfg.Network, client.NetworkCreateOptions{
			Driver: "bridge",
			IPAM: &network.IPAM{Config: []network.IPAMConfig{{
				Subnet:  subnet,
				Gateway: gateway(subnet),
			}}},
			Labels: map[string]string{labelNetwork: p.cfg.Network},
		})
		switch {
		case err == nil:
			p.cfg.Logger.Info("created network", zap.String("network", p.cfg.Network), zap.Stringer("subnet", subnet))
		case cerrdefs.IsConflict(err):
			// Made by another Provision in the meantime.
		default:
			return fmt.Errorf("create network %s (%s): %w", p.cfg.Network, subnet, err)
		}
		n, err = p.docker.NetworkInspect(ctx, p.cfg.Network, client.NetworkInspectOptions{})
	}
	if err != nil {
		return fmt.Errorf("network %s: %w", p.cfg.Network, err)
	}
	if n.Network.Driver != "bridge" {
		return fmt.Errorf("network %s has driver %q, want bridge: %w", p.cfg.Network, n.Network.Driver, ErrNetworkMismatch)
	}
	for _, c := range n.Network.IPAM.Config {
		if c.Subnet == subnet {
			return nil
		}
	}
	return fmt.Errorf("network %s exists without subnet %s (%+v): %w", p.cfg.Network, subnet, n.Network.IPAM.Config, ErrNetworkMismatch)
}

// networkAddresses returns the addresses of every endpoint on the network,
// ours or not: a container someone started there by hand holds its address
// as surely as ours do.
func (p *Provider) networkAddresses(ctx context.Context) (map[netip.Addr]bool, error) {
	n, err := p.docker.NetworkInspect(ctx, p.cfg.Network, client.NetworkInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("network %s: %w", p.cfg.Network, err)
	}
	used := make(map[netip.Addr]bool)
	for _, e := range n.Network.Containers {
		if e.IPv4Address.IsValid() {
			used[e.IPv4Address.Addr()] = true
		}
	}
	return used, nil
}
