package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"go.uber.org/zap"
)

// Destroy stops container id and removes it with its data: SIGTERM, then
// SIGKILL from Docker once Config.StopTimeout has passed. A container that
// is gone is destroyed already. An ID that names a container of another
// network, or of nobody's, is refused (ErrInvalidID): the provider removes
// only what it made.
func (p *Provider) Destroy(ctx context.Context, id string) error {
	if err := p.validID(id); err != nil {
		return fmt.Errorf("destroy: %w", err)
	}
	c, err := p.docker.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	switch {
	case cerrdefs.IsNotFound(err):
		// Gone; its data dir may not be (a Destroy cut short).
		if err := p.removeHostDataDir(id); err != nil {
			return fmt.Errorf("destroy: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("destroy %s: %w", id, err)
	}
	if c.Container.Config == nil || !p.ours(c.Container.Config.Labels) {
		return fmt.Errorf("destroy: %w: container %q was not made by a provider on network %s", ErrInvalidID, id, p.cfg.Network)
	}
	timeout := int((p.cfg.StopTimeout + time.Second - 1) / time.Second)
	start := time.Now()
	if _, err := p.docker.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &timeout}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("destroy %s: stop: %w", id, err)
	}
	if err := p.remove(ctx, id); err != nil {
		return fmt.Errorf("destroy %s: %w", id, err)
	}
	p.cfg.Logger.Info("destroyed instance", zap.String("id", id),
		zap.String("address", c.Container.Config.Labels[labelAddress]), zap.Duration("stop", time.Since(start)))
	return nil
}

// remove removes container id (killing it if it runs), its volumes and its
// data dir on the host. A container already gone, or being removed by
// someone else, is fine.
func (p *Provider) remove(ctx context.Context, id string) error {
	_, err := p.docker.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		if !cerrdefs.IsConflict(err) || !p.waitGone(ctx, id) {
			return fmt.Errorf("remove: %w", err)
		}
	}
	return p.removeHostDataDir(id)
}

// waitGone waits for a container that another caller is removing to be
// gone, for a few seconds at most; it says whether it went.
func (p *Provider) waitGone(ctx context.Context, id string) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := p.docker.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if cerrdefs.IsNotFound(err) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

// Prune removes what crashed Provisions left behind: the provider's
// containers created and never started (a Provision that crashed between
// create and start) once they are older than Config.PruneGrace (a younger
// one may be a Provision at work), and data dirs on the host
// (Config.HostDir) with no container, as old. It returns the IDs it
// removed, sorted. A container that ran and exited (killed, crashed, its
// host powered off) is not one of them: it may come back with `docker
// start`, so it stays (ListDead) until ClearDead or Destroy. List never
// shows any of these, so Prune may run at any time; until it does, they
// hold their addresses.
func (p *Provider) Prune(ctx context.Context) ([]string, error) {
	res, err := p.docker.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: p.ourFilter()})
	if err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}
	cutoff := p.cfg.Now().Add(-p.cfg.PruneGrace)
	var pruned []string
	var errs []error
	exists := make(map[string]bool)
	for _, c := range res.Items {
		id := containerName(c)
		exists[id] = true
		switch c.State {
		case container.StateCreated:
			if time.Unix(c.Created, 0).After(cutoff) {
				continue
			}
		default:
			continue
		}
		if err := p.remove(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", id, err))
			continue
		}
		p.cfg.Logger.Info("pruned dead instance", zap.String("id", id), zap.String("state", string(c.State)),
			zap.String("address", c.Labels[labelAddress]))
		pruned = append(pruned, id)
	}
	dirs, err := p.orphanDataDirs(exists, cutoff)
	errs = append(errs, err)
	for _, id := range dirs {
		if err := p.removeHostDataDir(id); err != nil {
			errs = append(errs, err)
			continue
		}
		p.cfg.Logger.Info("pruned data dir with no container", zap.String("id", id))
		pruned = append(pruned, id)
	}
	slices.Sort(pruned)
	if err := errors.Join(errs...); err != nil {
		return pruned, fmt.Errorf("prune: %w", err)
	}
	return pruned, nil
}

// orphanDataDirs returns the data dirs under Config.HostDir named like our
// containers, with no container, last changed before cutoff (a younger one
// may be a Provision's that has not created its container yet).
func (p *Provider) orphanDataDirs(exists map[string]bool, cutoff time.Time) ([]string, error) {
	if p.cfg.HostDir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(p.cfg.HostDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		id := e.Name()
		if !e.IsDir() || exists[id] || !strings.HasPrefix(id, p.namePrefix()+"-") || p.validID(id) != nil {
			continue
		}
		if info, err := e.Info(); err == nil && info.ModTime().Before(cutoff) {
			out = append(out, id)
		}
	}
	return out, nil
}
