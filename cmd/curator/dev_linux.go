package main

import (
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// devFollowParent asks for SIGTERM when dev's parent dies: under `go run`,
// a stopped go command must not leave dev and its nodes running. SIGTERM
// is dev's clean stop, which stops the nodes. Under nohup (SIGHUP ignored)
// the operator asked dev to outlive its shell: it does not follow its
// parent then.
func devFollowParent() {
	if devDetached() {
		return
	}
	_ = unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0, 0, 0)
}

// devDetached says whether dev was started to outlive its shell: under
// nohup, which ignores SIGHUP.
func devDetached() bool { return signal.Ignored(syscall.SIGHUP) }
