//go:build darwin || dragonfly || freebsd || netbsd || openbsd

package process

import "syscall"

// sysProcAttr puts an instance in a session of its own. Only Linux has a
// parent-death signal, so stopWithParent has no effect here.
func sysProcAttr(bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true}
}
