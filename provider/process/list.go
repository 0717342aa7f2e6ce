//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package process

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"go.uber.org/zap"

	"github.com/curatorproject/curator/provider"
)

// List returns the live instances whose labels match selector, sorted by
// ID. An instance whose process has died is not listed (the Instance type
// has no status to show it with): to the caller it is gone, and ListDead
// lists it until ClearDead or Destroy removes what it left. It takes no lock (records are written atomically,
// and a record half made by a running Provision has no pid yet, so it is
// not live), except to adopt the process of an instance whose starter
// crashed before recording it (adoptOrphans).
func (p *Provider) List(ctx context.Context, selector map[string]string) ([]provider.Instance, error) {
	out, err := p.listWhere(ctx, selector, record.alive)
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	return out, nil
}

// listWhere returns the instances whose labels match selector and whose
// record keep accepts, sorted by ID.
func (p *Provider) listWhere(ctx context.Context, selector map[string]string, keep func(record) bool) ([]provider.Instance, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	childReapAll()
	ids, err := p.recordIDs()
	if err != nil {
		return nil, err
	}
	var records []record
	for _, id := range ids {
		r, err := p.recordLoad(id)
		if errors.Is(err, fs.ErrNotExist) {
			continue // being made, or being destroyed
		}
		if err != nil {
			// One bad record must not blind the caller to the rest.
			p.cfg.Logger.Warn("skipping unreadable instance record", zap.String("id", id), zap.Error(err))
			continue
		}
		if provider.Matches(r.Labels, selector) {
			records = append(records, r)
		}
	}
	var out []provider.Instance
	for _, r := range p.adoptOrphans(ctx, records, false) {
		if keep(r) {
			out = append(out, p.instance(r))
		}
	}
	return out, nil
}
