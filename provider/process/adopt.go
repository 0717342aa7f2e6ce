//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package process

import (
	"context"
	"slices"

	"go.uber.org/zap"
)

// A Provision (or a Start) that crashes after it started the process and
// before it recorded the pid leaves a running node whose record says pid 0
// (or, for a Start, the dead process before it). Pruned as a crashed
// Provision, it would run on unseen, holding its address, and a node made
// there next would find the port taken. Such a process is found instead by
// its data dir, which its arguments name and no other instance's do, and
// adopted: its pid and start time are recorded, finishing what the crash
// cut short. List and Prune do this before they judge an instance.

// orphaned says whether r may be an instance whose process runs
// unrecorded: its recorded process (if any) is not running. One stopped on
// purpose has no process with its data dir either (a Stop in progress
// still has its recorded one).
func orphaned(r record) bool { return !r.alive() }

// adoptOrphans records the running process of every orphaned instance
// among records, under the lock, and returns the records as they are
// after. locked says whether the caller holds the lock already.
func (p *Provider) adoptOrphans(ctx context.Context, records []record, locked bool) []record {
	var found []int
	for i, r := range records {
		if !orphaned(r) {
			continue
		}
		if pids, _ := processWithArg(p.DataDir(r.ID)); len(pids) > 0 {
			found = append(found, i)
		}
	}
	if len(found) == 0 {
		return records
	}
	if !locked {
		unlock, err := p.lock(ctx)
		if err != nil {
			p.cfg.Logger.Warn("could not adopt instances running unrecorded", zap.Error(err))
			return records
		}
		defer unlock()
	}
	out := slices.Clone(records)
	for _, i := range found {
		r, err := p.recordLoad(out[i].ID) // again, under the lock
		if err != nil || !orphaned(r) {
			if err == nil {
				out[i] = r
			}
			continue
		}
		pids, starts := processWithArg(p.DataDir(r.ID))
		if len(pids) != 1 {
			if len(pids) > 1 {
				p.cfg.Logger.Warn("several processes run with one instance's data dir: adopting none", zap.String("id", r.ID), zap.Ints("pids", pids))
			}
			continue
		}
		was := r.PID
		r.PID, r.StartTime, r.Stopped = pids[0], starts[0], false
		if err := p.recordSave(r); err != nil {
			p.cfg.Logger.Warn("could not adopt an instance running unrecorded", zap.String("id", r.ID), zap.Error(err))
			continue
		}
		p.cfg.Logger.Info("adopted instance running unrecorded (its starter crashed before recording it)",
			zap.String("id", r.ID), zap.String("address", r.Address), zap.Int("pid", r.PID), zap.Int("recorded_pid", was))
		out[i] = r
	}
	return out
}
