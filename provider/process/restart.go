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

	"github.com/curatorproject/curator/provider"
)

// ErrAddressTaken is returned by Start when the address of a dead instance
// has gone to another live instance since it died.
var ErrAddressTaken = errors.New("address taken by another instance")

// Stop stops instance id and keeps everything of it: its dir, its data and
// its address, which no Provision hands out while it is stopped. Start runs
// it again; Destroy removes it. The process gets SIGTERM, and SIGKILL once
// Config.StopTimeout has passed or ctx is done. Stopping a stopped or dead
// instance only marks it stopped.
//
// The record says stopped before the signal goes, so that Prune, seeing the
// process gone, never takes a stopped instance for a dead one.
func (p *Provider) Stop(ctx context.Context, id string) error {
	if err := validID(id); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	r, err := p.markStopped(ctx, id)
	if err != nil {
		return fmt.Errorf("stop %s: %w", id, err)
	}
	if err := p.stop(ctx, r); err != nil {
		return fmt.Errorf("stop %s: %w", id, err)
	}
	p.cfg.Logger.Info("stopped instance", zap.String("id", id), zap.String("address", r.Address), zap.Int("pid", r.PID))
	return nil
}

// markStopped sets Stopped on id's record, under the lock so that no
// Provision or Start writes it meanwhile.
func (p *Provider) markStopped(ctx context.Context, id string) (record, error) {
	unlock, err := p.lock(ctx)
	if err != nil {
		return record{}, err
	}
	defer unlock()
	r, err := p.recordLoad(id)
	if err != nil {
		return r, err
	}
	if !r.Stopped {
		r.Stopped = true
		if err := p.recordSave(r); err != nil {
			return r, err
		}
	}
	return r, nil
}

// Start runs instance id again, stopped or dead, on its recorded address
// and data dir, with args (the placeholders of Provision replaced) and env:
// a node that was made with `agent init` or `agent join` comes back with
// `agent run`. Its labels stay. Starting an instance that is running does
// nothing.
func (p *Provider) Start(ctx context.Context, id string, args []string, env map[string]string) (provider.Instance, error) {
	if err := validID(id); err != nil {
		return provider.Instance{}, fmt.Errorf("start: %w", err)
	}
	unlock, err := p.lock(ctx)
	if err != nil {
		return provider.Instance{}, fmt.Errorf("start %s: %w", id, err)
	}
	defer unlock()
	r, err := p.recordLoad(id)
	if err != nil {
		return provider.Instance{}, fmt.Errorf("start %s: %w", id, err)
	}
	if r.alive() {
		return p.instance(r), nil
	}
	if r.PID == 0 && !r.Stopped {
		return provider.Instance{}, fmt.Errorf("start %s: a Provision that never finished (nothing to start; Prune removes it): %w", id, fs.ErrNotExist)
	}
	if !r.Stopped {
		// Dead, not stopped: its address is kept for it, but a record
		// made before dead instances kept theirs may hold it.
		if holder, err := p.addressHolder(r.Address, id); err != nil {
			return provider.Instance{}, fmt.Errorf("start %s: %w", id, err)
		} else if holder != "" {
			return provider.Instance{}, fmt.Errorf("start %s: %s held by %s: %w", id, r.Address, holder, ErrAddressTaken)
		}
	}
	// p.start saves r before it starts the process: Stopped stays set in
	// that save, so that a crash before the pid is recorded leaves a
	// stopped instance, not one Prune would take for a failed Provision.
	r.Stopped = true
	r.Args = provider.ExpandArgs(args, id, r.Address, p.DataDir(id))
	r.Started = time.Now().UTC()
	pid, err := p.start(r, env)
	if err != nil {
		return provider.Instance{}, fmt.Errorf("start %s: %w", id, err)
	}
	r.PID, r.StartTime, r.Stopped = pid, startTime(pid), false
	if err := p.recordSave(r); err != nil {
		// Nobody could find the process again: stop it.
		signal(pid, syscall.SIGKILL)
		childReap(pid)
		return provider.Instance{}, fmt.Errorf("start %s: %w", id, err)
	}
	p.cfg.Logger.Info("started instance", zap.String("id", id), zap.String("address", r.Address), zap.Int("pid", pid))
	return p.instance(r), nil
}

// addressHolder returns the ID of a live instance other than self that
// holds addr, or "".
func (p *Provider) addressHolder(addr, self string) (string, error) {
	ids, err := p.recordIDs()
	if err != nil {
		return "", err
	}
	for _, id := range ids {
		if id == self {
			continue
		}
		r, err := p.recordLoad(id)
		if err == nil && r.Address == addr && (r.Stopped || r.alive()) {
			return id, nil
		}
	}
	return "", nil
}

// ListStopped returns the instances whose labels match selector and whose
// process is not running, sorted by ID: the ones Stop stopped and the ones
// that died (ListDead tells these apart). These are what Start can run
// again. A Provision that never finished is not one of them.
func (p *Provider) ListStopped(ctx context.Context, selector map[string]string) ([]provider.Instance, error) {
	out, err := p.listWhere(ctx, selector, func(r record) bool {
		return (r.Stopped || r.PID > 0) && !r.alive()
	})
	if err != nil {
		return nil, fmt.Errorf("list stopped: %w", err)
	}
	return out, nil
}
