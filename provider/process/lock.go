//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package process

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/gofrs/flock"
)

// lockPoll is how often lock tries the lock again while another holds it.
const lockPoll = 10 * time.Millisecond

// lock takes the host-wide lock on DIR/lock, an flock(2): it serialises
// Provision and Prune between every Provider on the host, in this process
// or another (flock locks belong to an open file, so two opens in one
// process exclude each other too). The kernel drops it when its holder
// dies, so a crashed leader cannot wedge the next one. It waits for the
// lock until ctx is done.
func (p *Provider) lock(ctx context.Context) (unlock func(), err error) {
	path := filepath.Join(p.cfg.Dir, "lock")
	l := flock.New(path, flock.SetFlag(os.O_CREATE|os.O_RDWR), flock.SetPermissions(0o600))
	if _, err := l.TryLockContext(ctx, lockPoll); err != nil {
		var open *fs.PathError
		if errors.As(err, &open) && open.Op == "open" {
			return nil, fmt.Errorf("lock: %w", err)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		// Closing the file drops the lock.
		l.Close()
	}, nil
}
