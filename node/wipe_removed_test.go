package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/curatorproject/curator/consensus"
)

// TestWipeIfNotOurs: etcd data of a removed member other than the one the
// node's record hands it is wiped (the next run joins as the record's);
// the record's own member removed, or any other failure, leaves the data
// alone.
func TestWipeIfNotOurs(t *testing.T) {
	removed := func(id uint64) error {
		return fmt.Errorf("start etcd: %w", &consensus.RemovedError{MemberID: id})
	}
	for _, tt := range []struct {
		name   string
		err    error
		member uint64
		wiped  bool
	}{
		{"data of another, removed member: wiped", removed(0x1f92), 0xde1c, true},
		{"the record's own member removed: kept (the role goes, then the data)", removed(0xde1c), 0xde1c, false},
		{"no member handed: kept", removed(0x1f92), 0, false},
		{"another failure: kept", errors.New("etcd was not ready"), 0xde1c, false},
		{"no failure: kept", nil, 0xde1c, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.MkdirAll(filepath.Join(dir, etcdDir, "member", "wal"), 0o700); err != nil {
				t.Fatal(err)
			}
			a := &Agent{cfg: Config{DataDir: dir}}
			err := a.wipeIfNotOurs(zaptest.NewLogger(t), tt.err, tt.member)
			if !errors.Is(err, tt.err) {
				t.Errorf("returned %v, want %v passed on", err, tt.err)
			}
			_, statErr := os.Stat(filepath.Join(dir, etcdDir))
			if gone := errors.Is(statErr, os.ErrNotExist); gone != tt.wiped {
				t.Errorf("etcd data wiped: %v, want %v", gone, tt.wiped)
			}
		})
	}
}
