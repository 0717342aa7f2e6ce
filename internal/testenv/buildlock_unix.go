//go:build unix

package testenv

import (
	"os"
	"syscall"
)

// lockFile holds an exclusive lock on the file at path (made if missing)
// until the returned func is called: test binaries of several packages,
// run at once by go test, build the previous release once between them.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil // closing the file drops the lock
}
