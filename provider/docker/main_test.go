package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"go.uber.org/goleak"
)

// testLabel marks what the tests make (images, networks, containers), with
// this run's ID as its value, so cleanup removes exactly that.
const testLabel = "curator.test-run"

var (
	// runID names this run's image and networks.
	runID = randomHex(4)
	// testImage is the image the tests build from the real binary, and
	// remove when they end.
	testImage = "curator:test-" + runID

	setupOnce sync.Once
	// setupErr is why no test can use Docker here (no daemon, or the
	// image did not build); setupSkip says whether that is a skip.
	setupErr  error
	setupSkip bool
	// curatorBin is the static curator binary the image holds, which the
	// tests also run on the host as the CLI.
	curatorBin string
	binDir     string
)

func TestMain(m *testing.M) {
	code := m.Run()
	cleanupRun()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// requireDocker skips the test where no Docker daemon answers, and
// otherwise builds the binary and the test image, once.
func requireDocker(t *testing.T) {
	t.Helper()
	setupOnce.Do(setup)
	if setupSkip {
		t.Skip(setupErr)
	}
	if setupErr != nil {
		t.Fatal(setupErr)
	}
}

func setup() {
	p, err := New(Config{Image: testImage})
	if err != nil {
		setupErr = err
		return
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	err = p.Ping(ctx)
	cancel()
	if err != nil {
		setupErr, setupSkip = err, true
		return
	}
	if binDir, err = os.MkdirTemp("", "docker-provider-test-"); err != nil {
		setupErr = err
		return
	}
	curatorBin = filepath.Join(binDir, "curator")
	build := exec.Command("go", "build", "-o", curatorBin, "github.com/curatorproject/curator/cmd/curator")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		setupErr = fmt.Errorf("build curator: %v\n%s", err, out)
		return
	}
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := p.BuildImage(ctx, curatorBin, map[string]string{testLabel: runID}); err != nil {
		setupErr = err
	}
}

// cleanupRun removes whatever this run left in Docker: the networks
// labelled with its ID and every container on them, and the image.
func cleanupRun() {
	c, err := client.New(client.FromEnv)
	if err != nil {
		return
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nets, err := c.NetworkList(ctx, client.NetworkListOptions{Filters: make(client.Filters).Add("label", testLabel+"="+runID)})
	if err != nil {
		return // no daemon
	}
	for _, n := range nets.Items {
		if err := removeNetwork(ctx, c, n.Name); err != nil {
			fmt.Fprintf(os.Stderr, "cleanup: %v\n", err)
		}
	}
	if _, err := c.ImageRemove(ctx, testImage, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil && !cerrdefs.IsNotFound(err) {
		fmt.Fprintf(os.Stderr, "cleanup: remove image %s: %v\n", testImage, err)
	}
}

// removeNetwork removes network name and every container of a provider on
// it, with their volumes.
func removeNetwork(ctx context.Context, c *client.Client, name string) error {
	res, err := c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", labelNetwork+"="+name)})
	if err != nil {
		return err
	}
	for _, ctr := range res.Items {
		if _, err := c.ContainerRemove(ctx, ctr.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("remove container %s: %w", containerName(ctr), err)
		}
	}
	if _, err := c.NetworkRemove(ctx, name, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("remove network %s: %w", name, err)
	}
	return nil
}
