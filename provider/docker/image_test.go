package docker

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// TestBuildImageFiles: an image built with a file beside /curator (the
// curator binary again, at /usr/local/bin/curator-copy) has it at its path,
// executable, and runs it: a container started at that path runs
// `version` and exits 0. The image has an empty /tmp that anyone may write
// (mode 1777, as a plugin's socket needs).
func TestBuildImageFiles(t *testing.T) {
	requireDocker(t)
	image := testImage + "-files"
	p, err := New(Config{Image: image})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() }) // after the removals below
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const copyPath = "/usr/local/bin/curator-copy"
	if _, err := p.BuildImage(ctx, curatorBin, map[string]string{testLabel: runID}, ImageFile{Source: curatorBin, Path: copyPath}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := p.docker.ImageRemove(context.Background(), image, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil && !cerrdefs.IsNotFound(err) {
			t.Errorf("remove image %s: %v", image, err)
		}
	})
	res, err := p.docker.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: "curator-test-" + runID + "-files",
		Config: &container.Config{
			Image: image, Entrypoint: []string{copyPath}, Cmd: []string{"version"},
			Labels: map[string]string{testLabel: runID},
		},
		HostConfig: &container.HostConfig{NetworkMode: "none"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := p.docker.ContainerRemove(context.Background(), res.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			t.Errorf("remove container: %v", err)
		}
	})

	info, err := os.Stat(curatorBin)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		mode os.FileMode
		size int64
	}{
		{"/curator", 0o755, info.Size()},
		{copyPath, 0o755, info.Size()},
		{"/tmp", os.ModeDir | os.ModeSticky | 0o777, -1},
	} {
		st, err := p.docker.ContainerStatPath(ctx, res.ID, client.ContainerStatPathOptions{Path: tc.path})
		if err != nil {
			t.Errorf("stat %s in the image: %v", tc.path, err)
			continue
		}
		if st.Stat.Mode != tc.mode || tc.size >= 0 && st.Stat.Size != tc.size {
			t.Errorf("%s in the image: mode %v, size %d; want mode %v, size %d", tc.path, st.Stat.Mode, st.Stat.Size, tc.mode, tc.size)
		}
	}

	wait := p.docker.ContainerWait(ctx, res.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := p.docker.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatalf("start %s: %v", copyPath, err)
	}
	var code int64
	select {
	case r := <-wait.Result:
		code = r.StatusCode
	case err := <-wait.Error:
		t.Fatal(err)
	}
	logs, err := p.docker.ContainerLogs(ctx, res.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, logs); err != nil {
		t.Fatal(err)
	}
	if code != 0 || !strings.HasPrefix(out.String(), "curator ") {
		t.Errorf("%s version: exit %d, output %q; want 0 and the release it is", copyPath, code, out.String())
	}
}
