package main

import "syscall"

// devProcAttr puts a child in its own process group, so that a Ctrl-C in the
// terminal reaches dev alone and dev stops the nodes in order, and asks the
// kernel to send it SIGTERM if dev dies, so that no node outlives a killed
// dev.
func devProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
