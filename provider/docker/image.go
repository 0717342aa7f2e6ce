package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/moby/moby/client"
	"go.uber.org/zap"
)

// dockerfile is the image's recipe, the one `make image` builds too.
//
//go:embed Dockerfile
var dockerfile []byte

// WriteBuildContext writes the image's build context to w as a tar: the
// Dockerfile and binary, as /curator. The binary must be a static Linux
// executable (CGO_ENABLED=0 go build ./cmd/curator): the image has nothing
// else in it, no C library either.
func WriteBuildContext(w io.Writer, binary string) error {
	if err := checkStatic(binary); err != nil {
		return err
	}
	f, err := os.Open(binary)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	now := time.Now()
	tw := tar.NewWriter(w)
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(dockerfile)), ModTime: now}); err != nil {
		return err
	}
	if _, err := tw.Write(dockerfile); err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: "curator", Mode: 0o755, Size: info.Size(), ModTime: info.ModTime()}); err != nil {
		return err
	}
	if _, err := io.Copy(tw, f); err != nil {
		return fmt.Errorf("%s: %w", binary, err)
	}
	return tw.Close()
}

// checkStatic says why binary cannot run alone in the image, if it
// cannot: not a Linux ELF executable, or linked dynamically.
func checkStatic(binary string) error {
	f, err := elf.Open(binary)
	if err != nil {
		return fmt.Errorf("%s: not a Linux executable: %w", binary, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is linked dynamically; build it with CGO_ENABLED=0", binary)
		}
	}
	return nil
}

// BuildImage builds Config.Image from binary (see WriteBuildContext) with
// the daemon's builder, and returns the image's ID. labels go on the
// image. It needs no docker CLI and pulls nothing.
func (p *Provider) BuildImage(ctx context.Context, binary string, labels map[string]string) (string, error) {
	var buf bytes.Buffer
	if err := WriteBuildContext(&buf, binary); err != nil {
		return "", fmt.Errorf("build image %s: %w", p.cfg.Image, err)
	}
	res, err := p.docker.ImageBuild(ctx, &buf, client.ImageBuildOptions{
		Tags:        []string{p.cfg.Image},
		Remove:      true,
		ForceRemove: true,
		Labels:      labels,
	})
	if err != nil {
		return "", fmt.Errorf("build image %s: %w", p.cfg.Image, err)
	}
	defer res.Body.Close()
	id, err := readBuildOutput(res.Body)
	if err != nil {
		return "", fmt.Errorf("build image %s: %w", p.cfg.Image, err)
	}
	p.cfg.Logger.Info("built image", zap.String("image", p.cfg.Image), zap.String("id", id), zap.String("binary", binary))
	return id, nil
}

// buildMessage is one line of the daemon's build output.
type buildMessage struct {
	Stream string `json:"stream"`
	Error  string `json:"error"`
	Aux    struct {
		ID string `json:"ID"`
	} `json:"aux"`
}

// readBuildOutput reads the build's output to the end and returns the
// image ID it names, or the error it reports.
func readBuildOutput(r io.Reader) (string, error) {
	dec := json.NewDecoder(r)
	var id string
	for {
		var m buildMessage
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("read build output: %w", err)
		}
		if m.Error != "" {
			return "", errors.New(m.Error)
		}
		if m.Aux.ID != "" {
			id = m.Aux.ID
		}
	}
	if id == "" {
		return "", errors.New("the daemon named no image")
	}
	return id, nil
}

// copyImage saves Config.Image from p's engine and loads it onto to's:
// the same image, by the same ID.
func (p *Provider) copyImage(ctx context.Context, to *Provider) error {
	saved, err := p.docker.ImageSave(ctx, []string{p.cfg.Image})
	if err != nil {
		return fmt.Errorf("save image %s: %w", p.cfg.Image, err)
	}
	defer saved.Close()
	res, err := to.docker.ImageLoad(ctx, saved, client.ImageLoadWithQuiet(true))
	if err != nil {
		return fmt.Errorf("load image %s: %w", p.cfg.Image, err)
	}
	defer res.Close()
	if _, err := io.Copy(io.Discard, res); err != nil {
		return fmt.Errorf("load image %s: %w", p.cfg.Image, err)
	}
	return nil
}
