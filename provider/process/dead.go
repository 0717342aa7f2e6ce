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

// ErrNotDead is returned by ClearDead for an instance whose process runs,
// or that Stop stopped.
var ErrNotDead = errors.New("not dead")

// died says whether r's process ran and is gone without Stop: a kill, a
// crash, a power loss. Such an instance keeps its dir and its address:
// Start may run it again.
func (r record) died() bool { return r.PID > 0 && !r.Stopped && !r.alive() }

// ListDead returns the instances whose labels match selector and whose
// process ran and died without Stop, sorted by ID. Prune leaves them; they
// go by ClearDead or Destroy, or run again by Start.
func (p *Provider) ListDead(ctx context.Context, selector map[string]string) ([]provider.Instance, error) {
	out, err := p.listWhere(ctx, selector, record.died)
	if err != nil {
		return nil, fmt.Errorf("list dead: %w", err)
	}
	return out, nil
}

// ClearDead removes the dir of dead instance id (see ListDead), its data
// included, and keeps its log in PrunedLogDir. An instance that runs or
// was stopped is refused with ErrNotDead; one with nothing recorded is
// cleared already. It holds the lock, so that no Start runs the instance
// meanwhile.
//
// Only a caller that knows the instance's node cannot come back may call
// it: once the dir is gone, so is everything the node had.
func (p *Provider) ClearDead(ctx context.Context, id string) error {
	if err := validID(id); err != nil {
		return fmt.Errorf("clear dead: %w", err)
	}
	unlock, err := p.lock(ctx)
	if err != nil {
		return fmt.Errorf("clear dead %s: %w", id, err)
	}
	defer unlock()
	childReapAll()
	r, err := p.recordLoad(id)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("clear dead %s: %w", id, err)
	}
	r = p.adoptOrphans(ctx, []record{r}, true)[0]
	if !r.died() {
		return fmt.Errorf("clear dead %s: %w (running or stopped)", id, ErrNotDead)
	}
	p.keepLog(id)
	if err := p.recordDestroy(id); err != nil {
		return fmt.Errorf("clear dead %s: %w", id, err)
	}
	p.cfg.Logger.Info("cleared dead instance", zap.String("id", id), zap.Int("pid", r.PID), zap.String("address", r.Address))
	return nil
}
