//go:build !linux

package plugin

import "syscall"

// sysProcAttr: no parent-death signal outside Linux; go-plugin kills the
// plugin when the leader closes the provider.
func sysProcAttr() *syscall.SysProcAttr { return nil }
