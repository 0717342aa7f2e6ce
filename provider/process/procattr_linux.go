package process

import "syscall"

// sysProcAttr puts an instance in a session of its own (so that it
// outlives its starter, and a Ctrl-C in the starter's terminal does not
// reach it) and, with stopWithParent, asks the kernel for SIGTERM to it
// when the starter dies. The kernel sends that signal when the thread
// that forked the child exits; the Go runtime ends a thread only when a
// goroutine locked to it exits, which the provider's callers do not do.
func sysProcAttr(stopWithParent bool) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setsid: true}
	if stopWithParent {
		attr.Pdeathsig = syscall.SIGTERM
	}
	return attr
}
