package main

import "syscall"

// childProcAttr puts a curator process in its own process group, so that a
// Ctrl-C in the terminal reaches the bench alone and the bench stops the
// cluster itself, and asks the kernel to kill it if the bench dies, so no
// manager outlives a killed bench.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// openFileLimit is the soft limit of open files.
func openFileLimit() (uint64, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, err
	}
	return l.Cur, nil
}
