package main

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// devProcAttr puts a child in its own process group, so that a Ctrl-C in the
// terminal reaches dev alone and dev stops the nodes in order, and asks the
// kernel to send it SIGTERM if dev dies, so that no node outlives a killed
// dev.
func devProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// devFollowParent asks for SIGTERM when dev's parent dies: under `go run`,
// a stopped go command must not leave dev and its nodes running. SIGTERM
// is dev's clean stop.
func devFollowParent() {
	_ = unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0, 0, 0)
}
