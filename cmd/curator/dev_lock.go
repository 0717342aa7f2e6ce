package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gofrs/flock"
)

// devLockFile is the lock a live dev holds on its dir: flock'd, with the
// holder's pid in it. The kernel drops the lock when the holder dies, so a
// dev that was killed leaves no stale lock (only its pid, which the next
// dev overwrites).
const devLockFile = "dev.lock"

// errDevBusy: another live dev holds the dir.
var errDevBusy = errors.New("in use by another curator dev")

// openDir is the dev cluster's dir as an absolute path (--dir, or a new
// temporary one), locked for this process until lock is closed.
func (c *devConfig) openDir() (dir string, lock *flock.Flock, err error) {
	if dir = c.dir; dir == "" {
		if dir, err = os.MkdirTemp("", "curator-dev-"); err != nil {
			return "", nil, err
		}
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return "", nil, err
	}
	lock, err = lockDevDir(dir)
	return dir, lock, err
}

// lockDevDir takes dir's lock for this process, or says which process holds
// it. The returned lock is held until it is closed (or the process ends).
func lockDevDir(dir string) (*flock.Flock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, devLockFile)
	lock := flock.New(path, flock.SetFlag(os.O_CREATE|os.O_RDWR), flock.SetPermissions(0o600))
	ok, err := lock.TryLock()
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if !ok {
		holder := "another process"
		if data, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(data))); perr == nil {
				holder = fmt.Sprintf("process %d", pid)
			}
		}
		return nil, fmt.Errorf("%s is %w: %s holds %s; stop it first (Ctrl-C there, or kill -TERM it), or choose another --dir", dir, errDevBusy, holder, path)
	}
	// The pid is written through a second open of the file: the lock
	// belongs to the first, which stays open until lock is closed.
	if err := os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		lock.Close()
		return nil, err
	}
	return lock, nil
}
