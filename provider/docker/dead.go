package docker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"go.uber.org/zap"

	"github.com/curatorproject/curator/provider"
)

// ErrNotDead is returned by ClearDead for an instance whose container has
// not exited.
var ErrNotDead = errors.New("not dead")

// ListDead returns the instances whose labels match selector and whose
// container ran and exited (killed, crashed, its host powered off: Docker
// keeps it, its data included), sorted by ID. Prune leaves them: started
// again, such a machine comes back as it was. They go by ClearDead or
// Destroy.
func (p *Provider) ListDead(ctx context.Context, selector map[string]string) ([]provider.Instance, error) {
	f := p.ourFilter().Add("status", string(container.StateExited), string(container.StateDead))
	for k, v := range selector {
		f.Add("label", k+"="+v)
	}
	res, err := p.docker.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list dead: %w", err)
	}
	var out []provider.Instance
	for _, c := range res.Items {
		if in := p.instance(c); provider.Matches(in.Labels, selector) {
			out = append(out, in)
		}
	}
	slices.SortFunc(out, func(a, b provider.Instance) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// ClearDead removes dead instance id (see ListDead): its container and its
// data. A container that has not exited is refused with ErrNotDead; one
// that is gone is cleared already.
//
// Only a caller that knows the instance's node cannot come back may call
// it: once the container is gone, so is everything the node had.
func (p *Provider) ClearDead(ctx context.Context, id string) error {
	c, err := p.docker.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	switch {
	case cerrdefs.IsNotFound(err):
		return p.removeHostDataDir(id)
	case err != nil:
		return fmt.Errorf("clear dead %s: %w", id, err)
	}
	if st := c.Container.State; st == nil || (st.Status != container.StateExited && st.Status != container.StateDead) {
		return fmt.Errorf("clear dead %s: %w", id, ErrNotDead)
	}
	if err := p.remove(ctx, id); err != nil {
		return fmt.Errorf("clear dead %s: %w", id, err)
	}
	p.cfg.Logger.Info("cleared dead instance", zap.String("id", id))
	return nil
}
