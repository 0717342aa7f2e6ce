package docker

import (
	"bytes"
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/curatorproject/curator/provider"
)

// LastWords returns the last line container id's agent wrote (stdout and
// stderr), which Docker keeps until Prune removes the exited container;
// "" once it is gone.
func (p *Provider) LastWords(ctx context.Context, id string) (string, error) {
	if err := p.validID(id); err != nil {
		return "", fmt.Errorf("last words: %w", err)
	}
	logs, err := p.docker.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: "20"})
	if cerrdefs.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("last words of %s: %w", id, err)
	}
	defer logs.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, logs); err != nil {
		return "", fmt.Errorf("last words of %s: %w", id, err)
	}
	return provider.LastLine(out.Bytes()), nil
}
