package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/curatorproject/curator/internal/dockertest"
	"github.com/curatorproject/curator/internal/testenv"
)

// TestDevDocker runs `curator dev --provider docker`: its nodes are
// containers on a network of their own, the groups are on the docker
// provider, a worker container killed for good is replaced by its group,
// and SIGTERM removes every container. It runs where a Docker daemon
// answers, and skips, saying why, where none does.
func TestDevDocker(t *testing.T) {
	inChain(t, engineChain) // Docker engines
	const (
		network = "curator-e2e-dev"
		subnet  = "172.30.102.0/24"
	)
	p, image := dockertest.Image(t, network, subnet, "curator-e2e")
	t.Cleanup(func() {
		exec.Command("sh", "-c", "docker rm -f $(docker ps -aq --filter network="+network+") ; docker network rm "+network+"; docker rmi -f "+image).Run()
	})

	dir := t.TempDir()
	var stdout syncBuffer
	dev := start(t, "dev", filepath.Join(dir, "dev.log"), &stdout, "dev", "--provider", "docker",
		"--managers", "1", "--workers", "1", "--dir", dir, "--network", network, "--subnet", subnet, "--image", image)
	waitDevUp(t, dev, &stdout, 3*time.Minute)
	config := filepath.Join(dir, "config.yaml")
	if groups, err := groupLs(t, config); err != nil || len(groups) != 2 {
		t.Fatalf("group ls: %+v (%v), want managers and workers", groups, err)
	}
	worker := nodeOfGroup(t, config, "workers")
	if out, err := exec.Command("docker", "kill", worker.InstanceID).CombinedOutput(); err != nil {
		t.Fatalf("docker kill %s: %v\n%s", worker.InstanceID, err, out)
	}
	testenv.Eventually(t, 2*time.Minute, "the killed worker's container replaced and its node reaped", func() error {
		nodes, err := nodeLs(t, config)
		if err != nil {
			return err
		}
		if _, ok := byName(nodes, worker.Name); ok {
			return fmt.Errorf("%s is still listed", worker.Name)
		}
		for _, n := range nodes {
			if n.Group == "workers" && n.Status == "ready" {
				return nil
			}
		}
		return errors.New("no ready worker yet")
	})

	if err := dev.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := dev.wait(t, time.Minute); err != nil {
		t.Errorf("dev after SIGTERM: %v", err)
	}
	left, err := p.List(context.Background(), nil)
	if err != nil || len(left) > 0 {
		t.Errorf("after dev stopped: containers %+v (%v), want none", left, err)
	}
}
