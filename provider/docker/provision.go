package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"go.uber.org/zap"

	"github.com/curatorproject/curator/provider"
)

// idBytes is how many random bytes name a container (after the network's
// name and a dash).
const idBytes = 4

// errAddressTaken is what a start that lost its address to another
// container comes back with.
var errAddressTaken = errors.New("address taken")

// Provision starts one new container of spec: it picks an address of the
// subnet that no container holds, creates the container with that fixed
// address, spec.Args (the placeholders replaced, {{data-dir}} with
// Config.DataDir) as the arguments of the image's curator binary, spec.Env,
// and spec.Labels beside the provider's own, then starts it.
//
// Every call makes a new instance, as with the process provider: the
// machines of a group have identical specs, and the caller counts them with
// List first.
//
// Docker is the arbiter of addresses, so that two leaders (on one host or
// not, with no lock between them) never hand out one address twice: it
// assigns a fixed address when a container starts, and refuses the start
// if a running container has it. Both may pick the same free address and
// create their containers; the first to start wins, and the other removes
// its container and tries the next address. An address is taken in
// Provision's eyes while any container of ours holds it, started or not
// (a stopped node keeps its address until Prune), and while any endpoint
// on the network has it.
//
// A crash between create and start leaves a created container, which List
// ignores and Prune removes once it is older than Config.PruneGrace.
func (p *Provider) Provision(ctx context.Context, spec provider.Spec) (provider.Instance, error) {
	for k := range spec.Labels {
		if strings.HasPrefix(k, labelPrefix) {
			return provider.Instance{}, fmt.Errorf("provision: %w: label %q: keys under %q are the provider's", ErrInvalidSpec, k, labelPrefix)
		}
	}
	if spec.Domain != p.domain {
		return provider.Instance{}, fmt.Errorf("provision: %w: domain %q: this engine is domain %q", ErrInvalidSpec, spec.Domain, p.domain)
	}
	if err := p.ensureNetwork(ctx); err != nil {
		return provider.Instance{}, fmt.Errorf("provision: %w", err)
	}
	free, err := p.freeAddresses(ctx)
	if err != nil {
		return provider.Instance{}, fmt.Errorf("provision: %w", err)
	}
	for _, ip := range free {
		in, err := p.provisionAt(ctx, spec, ip)
		if errors.Is(err, errAddressTaken) {
			p.cfg.Logger.Info("address taken at start, trying the next", zap.Stringer("ip", ip))
			continue
		}
		if err != nil {
			return provider.Instance{}, fmt.Errorf("provision: %w", err)
		}
		return in, nil
	}
	subnet, _ := p.cfg.subnet()
	return provider.Instance{}, fmt.Errorf("provision: every address of %s in use: %w", subnet, ErrPoolExhausted)
}

// freeAddresses returns the subnet's node addresses (after the gateway,
// before the broadcast address) that no container holds, in order.
func (p *Provider) freeAddresses(ctx context.Context) ([]netip.Addr, error) {
	used, err := p.networkAddresses(ctx)
	if err != nil {
		return nil, err
	}
	ours, err := p.docker.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: p.ourFilter()})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	for _, c := range ours.Items {
		if ap, err := netip.ParseAddrPort(c.Labels[labelAddress]); err == nil {
			used[ap.Addr()] = true
		}
	}
	subnet, err := p.cfg.subnet()
	if err != nil {
		return nil, err
	}
	var free []netip.Addr
	for ip := gateway(subnet).Next(); subnet.Contains(ip.Next()); ip = ip.Next() {
		if !used[ip] {
			free = append(free, ip)
		}
	}
	return free, nil
}

// containerSocket is where a manager's container finds the Docker socket.
const containerSocket = "/var/run/docker.sock"

// provisionAt makes and starts one container at ip. Whatever fails, it
// leaves nothing behind; errAddressTaken says that another container got ip
// first.
func (p *Provider) provisionAt(ctx context.Context, spec provider.Spec, ip netip.Addr) (provider.Instance, error) {
	addr := netip.AddrPortFrom(ip, uint16(p.cfg.Port)).String()
	labels := p.containerLabels(spec.Labels, addr)
	env := make([]string, 0, len(spec.Env))
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		env = append(env, k+"="+spec.Env[k])
	}
	stopSeconds := int((p.cfg.StopTimeout + 999_999_999) / 1_000_000_000)
	host := &container.HostConfig{NetworkMode: container.NetworkMode(p.cfg.Network)}
	if spec.Manager && p.cfg.ManagerSocket != "" {
		host.Binds = append(host.Binds, p.cfg.ManagerSocket+":"+containerSocket)
		env = append(env, client.EnvOverrideHost+"=unix://"+containerSocket)
	}
	if spec.Manager {
		host.Binds = append(host.Binds, p.managerBinds...)
	}

	socketBinds := host.Binds
	var id string
	for range 10 {
		b := make([]byte, idBytes)
		rand.Read(b)
		id = p.namePrefix() + "-" + hex.EncodeToString(b)
		if p.cfg.HostDir != "" {
			dir := p.hostDataDir(id)
			if err := os.MkdirAll(p.cfg.HostDir, 0o700); err != nil {
				return provider.Instance{}, err
			}
			if err := os.Mkdir(dir, 0o700); errors.Is(err, os.ErrExist) {
				continue
			} else if err != nil {
				return provider.Instance{}, err
			}
			host.Binds = append(slices.Clone(socketBinds), dir+":"+p.cfg.DataDir)
		}
		user := ""
		if p.cfg.HostDir != "" {
			// The node runs as the provider's user, so that what it
			// writes on the host is the provider's to read and remove.
			user = fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())
		}
		_, err := p.docker.ContainerCreate(ctx, client.ContainerCreateOptions{
			Name: id,
			Config: &container.Config{
				Image:       p.cfg.Image,
				User:        user,
				Cmd:         provider.ExpandArgs(spec.Args, id, addr, p.cfg.DataDir),
				Env:         env,
				Labels:      labels,
				StopTimeout: &stopSeconds,
				// A volume unless HostDir binds a dir there, whatever
				// the image declares.
				Volumes: map[string]struct{}{p.cfg.DataDir: {}},
			},
			HostConfig: host,
			NetworkingConfig: &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
				p.cfg.Network: {IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: ip}},
			}},
		})
		if cerrdefs.IsConflict(err) {
			p.removeHostDataDir(id)
			continue // the name is taken
		}
		if cerrdefs.IsNotFound(err) {
			p.removeHostDataDir(id)
			return provider.Instance{}, fmt.Errorf("create container: image %s: %w (make image builds it, or BuildImage)", p.cfg.Image, err)
		}
		if err != nil {
			p.removeHostDataDir(id)
			return provider.Instance{}, fmt.Errorf("create container: %w", err)
		}
		if _, err := p.docker.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
			// Not ctx: the container must go even if the caller gave up.
			p.remove(context.WithoutCancel(ctx), id)
			if strings.Contains(err.Error(), "Address already in use") {
				return provider.Instance{}, fmt.Errorf("start %s at %s: %w", id, ip, errAddressTaken)
			}
			return provider.Instance{}, fmt.Errorf("start %s at %s: %w", id, ip, err)
		}
		p.cfg.Logger.Info("provisioned instance",
			zap.String("id", id), zap.String("address", addr), zap.Any("labels", spec.Labels))
		return provider.Instance{ID: id, Labels: maps.Clone(spec.Labels), Address: addr, Created: time.Now(), Domain: p.domain}, nil
	}
	return provider.Instance{}, fmt.Errorf("no free container name after 10 tries (last %s)", id)
}

// hostDataDir is the host side of id's data dir when Config.HostDir is set.
func (p *Provider) hostDataDir(id string) string {
	return filepath.Join(p.cfg.HostDir, id)
}

// removeHostDataDir removes id's data dir on the host, if there is one.
func (p *Provider) removeHostDataDir(id string) error {
	if p.cfg.HostDir == "" {
		return nil
	}
	if err := os.RemoveAll(p.hostDataDir(id)); err != nil {
		return fmt.Errorf("remove data dir of %s: %w", id, err)
	}
	return nil
}
