package docker

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/moby/moby/client"

	"github.com/curatorproject/curator/provider"
)

// List returns the running containers of the provider's network whose
// labels match selector, sorted by ID. A container that is not running
// (created by a Provision that crashed, or whose node exited) is not
// listed: to the caller it is gone, and Prune removes it.
func (p *Provider) List(ctx context.Context, selector map[string]string) ([]provider.Instance, error) {
	// A paused container is a frozen machine, still there (as a stopped
	// process is for the process provider): listed, so that its node,
	// down meanwhile, is not removed as a dead machine's.
	f := p.ourFilter().Add("status", "running", "paused")
	for k, v := range selector {
		f.Add("label", k+"="+v)
	}
	res, err := p.docker.ContainerList(ctx, client.ContainerListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	var out []provider.Instance
	for _, c := range res.Items {
		// The daemon filtered already, but on every label of the
		// container, its image's too; Matches, on the spec's labels,
		// has the last word.
		if in := p.instance(c); provider.Matches(in.Labels, selector) {
			out = append(out, in)
		}
	}
	slices.SortFunc(out, func(a, b provider.Instance) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}
