//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package process

import (
	"sync"
	"syscall"
	"time"
)

// children are the pids of the processes this process started and has not
// reaped yet, for every Provider in it. Only these are ever waited for: a
// wait on any other pid could steal the exit status of a child someone else
// in this process (an exec.Cmd) is waiting for. A pid in the set cannot be
// recycled, since an unreaped child keeps its pid.
var children = struct {
	sync.Mutex
	pids map[int]bool
}{pids: make(map[int]bool)}

func childAdd(pid int) {
	children.Lock()
	defer children.Unlock()
	children.pids[pid] = true
}

// childReap reaps pid if it is a child of ours that has exited, without
// blocking.
func childReap(pid int) {
	children.Lock()
	defer children.Unlock()
	childReapLocked(pid)
}

// childReapAll reaps every child of ours that has exited: the ones whose
// records are gone included, which nobody would look at again.
func childReapAll() {
	children.Lock()
	defer children.Unlock()
	for pid := range children.pids {
		childReapLocked(pid)
	}
}

func childReapLocked(pid int) {
	if !children.pids[pid] {
		return
	}
	var ws syscall.WaitStatus
	got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	if got == pid || err == syscall.ECHILD {
		delete(children.pids, pid)
	}
}

// childWait waits up to timeout for pid, if it is a child of ours, to be
// reaped. A process can look dead (its main thread a zombie) a moment
// before it can be reaped: its other threads are still on their way out.
func childWait(pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		childReap(pid)
		children.Lock()
		tracked := children.pids[pid]
		children.Unlock()
		if !tracked {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// alive says whether r's process is running: the pid exists, is ours to
// signal, is not a zombie, and (where the start time is known) started when
// r says it did. Anything else, including a pid another user now holds,
// means the node is gone.
func (r record) alive() bool {
	if r.PID <= 0 {
		return false
	}
	// Reap first, so that off Linux a zombie child of ours (which
	// signal 0 cannot tell from a live one) is gone; and again once the
	// process is found dead, so that it does not stay a zombie until the
	// next look.
	childReap(r.PID)
	if syscall.Kill(r.PID, 0) != nil || !sameProcess(r.PID, r.StartTime) {
		childReap(r.PID)
		return false
	}
	return true
}
