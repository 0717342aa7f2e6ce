//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package process

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
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

// Prune removes what crashed Provisions left behind: a dir with no record,
// and a record that never got a process (pid 0, not stopped, and no
// process runs with its data dir: adopt.go). It returns the IDs it
// removed. List never shows these, so Prune is only about disk and
// addresses' bookkeeping, and may run at any time.
//
// An instance whose process ran and is gone without Stop (killed, crashed,
// an OOM kill of the tree, a power loss, a reboot) is not pruned: its data
// dir may be all that is left of a node that a restart brings back
// (ListDead, Start). It keeps its dir and its address until ClearDead or
// Destroy, which only a caller that knows its node is gone from the
// cluster may call (the group loop).
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
		if err == nil {
			r = p.adoptOrphans(ctx, []record{r}, true)[0]
		}
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// Under the lock, a dir without a record is a crashed
			// Provision's.
		case err != nil:
			// Unreadable: it may belong to a live process, so leave
			// it for an operator.
			errs = append(errs, err)
			continue
		case r.Stopped || r.alive() || r.PID > 0:
			// Stopped, running, or dead after it ran: kept.
			continue
		}
		p.keepLog(id)
		if err := p.recordDestroy(id); err != nil {
			errs = append(errs, err)
			continue
		}
		p.cfg.Logger.Info("pruned a crashed Provision's instance", zap.String("id", id), zap.Int("pid", r.PID), zap.String("address", r.Address))
		pruned = append(pruned, id)
	}
	if err := errors.Join(errs...); err != nil {
		return pruned, fmt.Errorf("prune: %w", err)
	}
	return pruned, nil
}

// KeptLogs is how many logs of pruned instances PrunedLogDir keeps, the
// newest.
const KeptLogs = 32

// PrunedLogDir holds the agent logs of instances whose dirs Prune or
// ClearDead removed, as <id>.log: why a machine died is in its log, and
// the dir goes with it.
func (p *Provider) PrunedLogDir() string { return filepath.Join(p.cfg.Dir, "pruned") }

// keepLog moves a pruned or cleared instance's log to PrunedLogDir and trims that to
// the newest KeptLogs. Best effort: a log that cannot be kept does not
// keep a dead instance's dir around.
func (p *Provider) keepLog(id string) {
	dir := p.PrunedLogDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return
	}
	if err := os.Rename(p.LogFile(id), filepath.Join(dir, id+".log")); err != nil {
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) <= KeptLogs {
		return
	}
	type kept struct {
		name string
		mod  time.Time
	}
	var logs []kept
	for _, e := range entries {
		if info, err := e.Info(); err == nil {
			logs = append(logs, kept{e.Name(), info.ModTime()})
		}
	}
	slices.SortFunc(logs, func(a, b kept) int { return b.mod.Compare(a.mod) })
	for _, l := range logs[min(KeptLogs, len(logs)):] {
		os.Remove(filepath.Join(dir, l.name))
	}
}
