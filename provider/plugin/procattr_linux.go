package plugin

import "syscall"

// sysProcAttr asks the kernel to kill the plugin when the leader dies
// (the parent-death signal): a leader killed with -9 leaves no plugin
// behind, and its successor starts its own. The kernel sends it when the
// thread that forked the plugin exits; the Go runtime ends a thread only
// when a goroutine locked to it exits, which the group loop does not do.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
