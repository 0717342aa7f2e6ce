//go:build !linux

package main

import "syscall"

// childProcAttr puts a curator process in its own process group, so that a
// Ctrl-C in the terminal reaches the bench alone and the bench stops the
// cluster itself.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// openFileLimit is unknown here: the bench does not check it.
func openFileLimit() (uint64, error) { return 0, nil }
