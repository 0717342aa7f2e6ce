//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// lock takes the host-wide lock on DIR/lock, an flock(2): it serialises
// Provision and Prune between every Provider on the host, in this process
// or another (flock locks belong to an open file, so two opens in one
// process exclude each other too). The kernel drops it when its holder
// dies, so a crashed leader cannot wedge the next one. It waits for the
// lock until ctx is done.
func (p *Provider) lock(ctx context.Context) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(p.cfg.Dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	fd := int(f.Fd())
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", f.Name(), ctx.Err())
		case <-tick.C:
		}
	}
	return func() {
		// Closing the file drops the lock.
		f.Close()
	}, nil
}
