// Package dockertest is what the end-to-end tests that run curator nodes as
// containers share: a docker provider on a network of the test's own, and
// the image of this tree, built for the test. A test that calls it skips,
// saying why, where no Docker daemon answers.
package dockertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/curatorproject/curator/internal/testenv"
	"github.com/curatorproject/curator/provider/docker"
)

// Image returns a docker provider of network (made on subnet when the
// provider first needs it) and the tag of an image FROM scratch holding a
// static build of ./cmd/curator, made for this test process. It skips t
// when no Docker daemon answers. The provider is closed when t ends; the
// caller removes what it made on the network, and the image.
func Image(t *testing.T, network, subnet, name string) (*docker.Provider, string) {
	t.Helper()
	image := fmt.Sprintf("%s:%d", name, os.Getpid())
	p, err := docker.New(docker.Config{Network: network, Subnet: subnet, Image: image})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	err = p.Ping(ctx)
	cancel()
	if err != nil {
		t.Skipf("no Docker daemon: %v", err)
	}
	static := filepath.Join(t.TempDir(), "curator")
	if err := testenv.GoBuildStatic(static, "./cmd/curator"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.BuildImage(context.Background(), static, nil); err != nil {
		t.Fatal(err)
	}
	return p, image
}
