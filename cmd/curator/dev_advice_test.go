package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/curatorproject/curator/client"
	"github.com/curatorproject/curator/curator"
)

// On a dev cluster the quorum-loss advice names `dev --force-new-cluster`;
// elsewhere it stays the managers' own.
func TestDevQuorumAdvice(t *testing.T) {
	lost := fmt.Errorf("%w: etcd has no leader: 1 of its 3 voters answer. To recover, %s", client.ErrQuorumLost, curator.QuorumAdvice)
	dev := t.TempDir()
	if err := os.Mkdir(filepath.Join(dev, "instances"), 0o755); err != nil {
		t.Fatal(err)
	}
	got := devQuorumAdvice(filepath.Join(dev, "config.yaml"), lost)
	if !errors.Is(got, client.ErrQuorumLost) {
		t.Errorf("reworded error %v is no longer ErrQuorumLost", got)
	}
	want := "`curator dev --dir " + dev + " --force-new-cluster`"
	if !strings.Contains(got.Error(), want) || strings.Contains(got.Error(), "agent run") {
		t.Errorf("on a dev cluster: %q, want %s and no agent run", got, want)
	}
	other := filepath.Join(t.TempDir(), "config.yaml")
	if got := devQuorumAdvice(other, lost); got != lost {
		t.Errorf("elsewhere: %v, want the managers' advice unchanged", got)
	}
	plain := errors.New("something else")
	if got := devQuorumAdvice(filepath.Join(dev, "config.yaml"), plain); got != plain {
		t.Errorf("another error: %v, want it unchanged", got)
	}
}
