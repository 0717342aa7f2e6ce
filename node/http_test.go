package node

import (
	"os"
	"path/filepath"
	"testing"
)

// A dev cluster's node (DIR/instances/ID/data beside DIR/dev.json) is
// told apart from any other, so its /healthz names dev's commands.
func TestDevClusterDir(t *testing.T) {
	dev := t.TempDir()
	if err := os.WriteFile(filepath.Join(dev, "dev.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	for _, tc := range []struct {
		dataDir string
		dir     string
		ok      bool
	}{
		{filepath.Join(dev, "instances", "proc-1", "data"), dev, true},
		{filepath.Join(dev, "instances", "proc-1", "data") + "/", dev, true},
		{filepath.Join(other, "instances", "proc-1", "data"), "", false},
		{filepath.Join(dev, "nodes", "proc-1", "data"), "", false},
		{"/var/lib/curator", "", false},
	} {
		dir, ok := devClusterDir(tc.dataDir)
		if dir != tc.dir || ok != tc.ok {
			t.Errorf("devClusterDir(%s) = %q, %v; want %q, %v", tc.dataDir, dir, ok, tc.dir, tc.ok)
		}
	}
}
