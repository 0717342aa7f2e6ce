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

// proc is a running process: its pid and start time.
type proc struct {
	pid   int
	start uint64
}

// adoptOrphans records the running process of every orphaned instance
// among records, under the lock, and returns the records as they are
// after. locked says whether the caller holds the lock already.
func (p *Provider) adoptOrphans(ctx context.Context, records []record, locked bool) []record {
	var dirs []string
	for _, r := range records {
		if orphaned(r) {
			dirs = append(dirs, p.DataDir(r.ID))
		}
	}
	running := processesWithArgs(dirs)
	if len(running) == 0 {
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
	// Again, under the lock: a Provision or Start may have recorded its
	// process meanwhile.
	running = processesWithArgs(dirs)
	out := slices.Clone(records)
	for i := range out {
		procs, ok := running[p.DataDir(out[i].ID)]
		if !ok {
			continue
		}
		r, err := p.recordLoad(out[i].ID)
		if err != nil || !orphaned(r) {
			if err == nil {
				out[i] = r
			}
			continue
		}
		if len(procs) != 1 {
			pids := make([]int, len(procs))
			for j, pr := range procs {
				pids[j] = pr.pid
			}
			p.cfg.Logger.Warn("several processes run with one instance's data dir: adopting none", zap.String("id", r.ID), zap.Ints("pids", pids))
			continue
		}
		was := r.PID
		r.PID, r.StartTime, r.Stopped = procs[0].pid, procs[0].start, false
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
