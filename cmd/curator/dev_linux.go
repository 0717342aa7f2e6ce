package main

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// devFollowParent asks for SIGTERM when dev's parent dies: under `go run`,
// a stopped go command must not leave dev and its nodes running. SIGTERM
// is dev's clean stop, which stops the nodes.
func devFollowParent() {
	_ = unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0, 0, 0)
}
