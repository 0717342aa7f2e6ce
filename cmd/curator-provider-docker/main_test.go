package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/curatorproject/curator/internal/testenv"
	"github.com/curatorproject/curator/provider/docker"
)

var (
	// runID names this run's image and networks.
	runID = randomHex(4)
	// testImage is the image the tests build from the real binary, FROM
	// scratch, and remove when they end.
	testImage = "curator:plugin-test-" + runID
	// dockerPlugin is this package built, the plugin the tests run as a
	// leader does.
	dockerPlugin string
	// noDocker is why the Docker tests skip: no daemon answers here.
	noDocker error
)

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "docker-plugin-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	dockerPlugin = filepath.Join(dir, "curator-provider-docker")
	if err := testenv.GoBuild(dockerPlugin, "./cmd/curator-provider-docker"); err != nil {
		fmt.Fprintf(os.Stderr, "build the docker plugin: %v\n", err)
		return 1
	}
	if code, ok := buildImage(dir); !ok {
		return code
	}
	defer removeImage()
	return testenv.CheckLeaks(m.Run())
}

// buildImage builds testImage from a static curator binary, or sets
// noDocker when no daemon answers. ok says whether the tests run.
func buildImage(dir string) (code int, ok bool) {
	p, err := docker.New(docker.Config{Image: testImage})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1, false
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
	noDocker = p.Ping(pctx)
	pcancel()
	if noDocker != nil {
		return 0, true
	}
	bin := filepath.Join(dir, "curator")
	os.Setenv("CGO_ENABLED", "0")
	err = testenv.GoBuild(bin, "./cmd/curator")
	os.Unsetenv("CGO_ENABLED")
	if err == nil {
		_, err = p.BuildImage(ctx, bin, nil)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "build the test image: %v\n", err)
		return 1, false
	}
	return 0, true
}

func removeImage() {
	c, err := client.New(client.FromEnv)
	if err != nil {
		return
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.ImageRemove(ctx, testImage, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil && !cerrdefs.IsNotFound(err) {
		fmt.Fprintf(os.Stderr, "cleanup: remove image %s: %v\n", testImage, err)
	}
}

// requireDocker skips the test where no Docker daemon answers.
func requireDocker(t *testing.T) {
	t.Helper()
	if noDocker != nil {
		t.Skipf("no Docker daemon: %v", noDocker)
	}
}

// removeNetwork removes network name and every container on it, when the
// test ends.
func removeNetwork(t *testing.T, name string) {
	t.Cleanup(func() {
		c, err := client.New(client.FromEnv)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", "curator.docker.network="+name)})
		if err != nil {
			t.Error(err)
			return
		}
		for _, ctr := range res.Items {
			if _, err := c.ContainerRemove(ctx, ctr.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
				t.Errorf("remove container %s: %v", ctr.ID, err)
			}
		}
		if _, err := c.NetworkRemove(ctx, name, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			t.Errorf("remove network %s: %v", name, err)
		}
	})
}
