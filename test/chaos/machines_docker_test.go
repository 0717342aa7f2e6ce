package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/curatorproject/curator/internal/testenv"
	"github.com/curatorproject/curator/provider"
)

// TestDockerKeepLogs: what a failed Docker seed keeps of its containers'
// logs, which Docker drops with the container: one file per container of
// the run's network, its stdout and its stderr, a container that has
// exited included.
func TestDockerKeepLogs(t *testing.T) {
	const (
		network = "curator-chaos-logs"
		subnet  = "172.30.105.0/24"
	)
	m, p, _ := newDockerMachines(t, network, subnet)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	said := map[string]string{} // container → what its log must hold
	for args, want := range map[string]string{
		"version":         "curator",                           // stdout
		"no-such-command": `unknown command "no-such-command"`, // stderr
	} {
		in, err := p.Provision(ctx, provider.Spec{Args: []string{args}})
		if err != nil {
			t.Fatal(err)
		}
		said[in.ID] = want
	}
	dir := filepath.Join(t.TempDir(), "logs")
	for id, want := range said {
		// Each container exits at once; its log is complete then.
		testenv.Eventually(t, 30*time.Second, "the log of "+id, func() error {
			if err := m.keepLogs(dir); err != nil {
				return err
			}
			b, err := os.ReadFile(filepath.Join(dir, id+".log"))
			if err != nil {
				return err
			}
			if !strings.Contains(string(b), want) {
				return fmt.Errorf("%s.log holds %q, want %q in it", id, b, want)
			}
			return nil
		})
	}
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(said) {
		t.Errorf("%d logs kept, want one per container (%d)", len(files), len(said))
	}
}
