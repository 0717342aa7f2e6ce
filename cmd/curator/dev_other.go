//go:build !linux

package main

import "syscall"

// devProcAttr puts a child in its own process group, so that a Ctrl-C in the
// terminal reaches dev alone and dev stops the nodes in order. Only Linux
// can also tie the child's life to dev's (see dev_linux.go).
func devProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// devFollowParent: only Linux can tie dev's life to its parent's.
func devFollowParent() {}
