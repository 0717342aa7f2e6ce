package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/curatorproject/curator/client"
	"github.com/curatorproject/curator/internal/localcluster"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/provider"
	"github.com/curatorproject/curator/provider/docker"
)

// `curator dev --provider docker`: the same cluster as dev's, its nodes
// containers of the docker provider. dev starts the first manager's
// container itself, with its data dir bind-mounted from DIR/instances so
// that its admin config is on the host; the groups' containers, made by
// whichever manager leads (a manager's container has the Docker socket),
// keep their data in volumes. Ctrl-C removes every container of the
// network: a docker dev cluster does not restart.

// Defaults of the docker dev cluster.
const (
	devDockerNetwork = "curator-dev"
	devDockerSubnet  = "172.30.100.0/24"
)

// dockerConfig is the docker provider of a dev cluster whose first
// manager's data dir is under hostDir.
func (c *devConfig) dockerConfig(hostDir string) docker.Config {
	return docker.Config{Network: c.network, Subnet: c.subnet, Image: c.image, Port: devPort, HostDir: hostDir, StopTimeout: devStopGrace}
}

func runDevDocker(ctx context.Context, stdout, stderr io.Writer, c *devConfig) (err error) {
	dir, lock, err := c.openDir()
	if err != nil {
		return err
	}
	defer lock.Close()
	if node := filepath.Join(dir, client.ConfigFileName); fileExists(node) {
		return fmt.Errorf("%s holds a dev cluster already: a docker dev cluster does not restart; choose another --dir", dir)
	}
	cfg := c.dockerConfig(filepath.Join(dir, "instances"))
	cfg.Logger = devLogger(stderr)
	p, err := docker.New(cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	if err := p.Ping(ctx); err != nil {
		return err
	}
	if left, err := p.List(ctx, nil); err != nil {
		return err
	} else if len(left) > 0 {
		return fmt.Errorf("the Docker network %s holds %d curator containers already (another dev cluster?): remove them, or choose another --network and --subnet", c.network, len(left))
	}
	defer func() {
		if rmErr := destroyAll(p); err == nil {
			err = rmErr
		}
	}()
	groups := devGroups(c, func() *pb.ProviderSpec {
		return &pb.ProviderSpec{Kind: &pb.ProviderSpec_Docker{Docker: &pb.DockerProviderSpec{
			Network: c.network, Subnet: c.subnet, Image: c.image, Port: devPort,
		}}}
	})
	cfgPath := filepath.Join(dir, client.ConfigFileName)
	fmt.Fprintf(stderr, "starting %s and %s in containers of %s on the network %s\n", count(c.managers, "manager"), count(c.workers, "worker"), c.image, c.network)
	cl, err := devUp(ctx, groups, p, cfgPath, stderr, func(labels map[string]string) localcluster.Starter {
		return func(ctx context.Context, l localcluster.Launch) (localcluster.Process, error) {
			in, err := p.Provision(ctx, provider.Spec{
				Labels:  labels,
				Args:    append([]string{"agent", l.Verb, "--data-dir", provider.PlaceholderDataDir, "--listen", provider.PlaceholderAddress}, l.Args...),
				Env:     l.Env,
				Manager: true,
			})
			if err != nil {
				return nil, err
			}
			return &devContainer{p: p, in: in, hostDir: cfg.HostDir}, nil
		}
	})
	if err != nil {
		return err
	}
	if err := writeNodes(stdout, formatTable, cl.Nodes); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nCluster running in containers on the network %s, made by the groups managers and workers; node logs: docker logs ID.\n", c.network)
	printDevUsage(stdout, cfgPath, "Press Ctrl-C to remove every container.")
	<-ctx.Done()
	fmt.Fprintln(stderr, "removing every container")
	return nil
}

// destroyAll removes every container of the provider's network, the
// managers' first.
func destroyAll(p *docker.Provider) error {
	ctx := context.Background() // dev's own has ended
	all, err := p.List(ctx, nil)
	if err != nil {
		return err
	}
	return managersFirst(all, func(id string) error { return p.Destroy(ctx, id) })
}

// devContainer is the first manager's container, as localcluster sees it.
type devContainer struct {
	p       *docker.Provider
	in      provider.Instance
	hostDir string
}

func (d *devContainer) Address() string { return d.in.Address }
func (d *devContainer) DataDir() string { return filepath.Join(d.hostDir, d.in.ID) }
func (d *devContainer) LogFile() string { return "docker logs " + d.in.ID }

// Exited says the container has gone when the provider no longer lists it
// as running.
func (d *devContainer) Exited() error {
	running, err := d.p.List(context.Background(), nil)
	if err != nil || slices.ContainsFunc(running, func(in provider.Instance) bool { return in.ID == d.in.ID }) {
		return nil
	}
	return errors.New("its container is not running")
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
