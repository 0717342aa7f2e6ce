//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package process

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// killWait bounds the wait for a process to go after SIGKILL.
const killWait = 5 * time.Second

// Destroy stops instance id and removes everything of it: SIGTERM to its
// process group, SIGKILL once Config.StopTimeout has passed or ctx is done,
// then its dir goes. An ID with nothing recorded is already destroyed.
func (p *Provider) Destroy(ctx context.Context, id string) error {
	if err := validID(id); err != nil {
		return fmt.Errorf("destroy: %w", err)
	}
	r, err := p.recordLoad(id)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Gone, or a dir a crashed Provision left (which has no process).
	case err != nil:
		return fmt.Errorf("destroy: %w", err)
	default:
		if err := p.stop(ctx, r); err != nil {
			return fmt.Errorf("destroy %s: %w", id, err)
		}
	}
	if err := p.recordDestroy(id); err != nil {
		return fmt.Errorf("destroy %s: %w", id, err)
	}
	p.cfg.Logger.Info("destroyed instance", zap.String("id", id), zap.String("address", r.Address), zap.Int("pid", r.PID))
	return nil
}

// stop ends r's process, if it is alive. The signals go to the process
// group (the session the process leads), so that whatever it started goes
// with it.
func (p *Provider) stop(ctx context.Context, r record) error {
	if !r.alive() {
		childWait(r.PID, killWait)
		return nil
	}
	signal(r.PID, syscall.SIGTERM)
	term, cancel := context.WithTimeout(ctx, p.cfg.StopTimeout)
	defer cancel()
	if waitGone(term, r) {
		childWait(r.PID, killWait)
		return nil
	}
	p.cfg.Logger.Warn("instance ignored SIGTERM, killing it",
		zap.String("id", r.ID), zap.Int("pid", r.PID), zap.Duration("waited", p.cfg.StopTimeout))
	signal(r.PID, syscall.SIGKILL)
	// Not ctx: SIGKILL is certain, and leaving the process to run on
	// would be worse than a short overrun.
	kill, cancel := context.WithTimeout(context.Background(), killWait)
	defer cancel()
	if !waitGone(kill, r) {
		return fmt.Errorf("pid %d still running %v after SIGKILL", r.PID, killWait)
	}
	childWait(r.PID, killWait)
	return nil
}

// signal sends sig to the process group pid leads, or to pid alone if the
// group is gone.
func signal(pid int, sig syscall.Signal) {
	if err := syscall.Kill(-pid, sig); err != nil {
		syscall.Kill(pid, sig)
	}
}

// waitGone waits until r's process is no longer alive, or ctx is done; it
// says whether the process went.
func waitGone(ctx context.Context, r record) bool {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for r.alive() {
		select {
		case <-ctx.Done():
			return !r.alive()
		case <-tick.C:
		}
	}
	return true
}

// Prune removes what dead instances left behind: the dir of every instance
// whose process is gone (killed behind the provider's back, or crashed)
// and that Stop did not stop,
// and of every Provision that crashed before it recorded a pid. It returns
// the IDs it removed. List never shows these, so Prune is only about disk
// and addresses' bookkeeping, and may run at any time.
func (p *Provider) Prune(ctx context.Context) ([]string, error) {
	unlock, err := p.lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}
	defer unlock()
	childReapAll()
	ids, err := p.recordIDs()
	if err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}
	var pruned []string
	var errs []error
	for _, id := range ids {
		r, err := p.recordLoad(id)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// Under the lock, a dir without a record is a crashed
			// Provision's.
		case err != nil:
			// Unreadable: it may belong to a live process, so leave
			// it for an operator.
			errs = append(errs, err)
			continue
		case r.Stopped || r.alive():
			continue
		}
		if err := p.recordDestroy(id); err != nil {
			errs = append(errs, err)
			continue
		}
		p.cfg.Logger.Info("pruned dead instance", zap.String("id", id), zap.Int("pid", r.PID), zap.String("address", r.Address))
		pruned = append(pruned, id)
	}
	if err := errors.Join(errs...); err != nil {
		return pruned, fmt.Errorf("prune: %w", err)
	}
	return pruned, nil
}
