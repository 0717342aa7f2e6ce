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
	"path"
	"slices"
	"strings"
	"time"

	"github.com/moby/moby/client"
	"go.uber.org/zap"
)

// dockerfile is the image's recipe, the one `make image` builds too.
//
//go:embed Dockerfile
var dockerfile []byte

// ImageFile is a file the image carries beside /curator: a static Linux
// executable, such as a provider plugin that the leader, in its container,
// starts as it would on a host.
type ImageFile struct {
	// Source is the file on the host.
	Source string
	// Path is where the image has it: an absolute, clean path, neither
	// /curator nor in /tmp or the data dir's volume (DefaultDataDir).
	Path string
}

// WriteBuildContext writes the image's build context to w as a tar: the
// Dockerfile, and the image's files under rootfs/ (see Dockerfile): binary
// as /curator, an empty /tmp (mode 1777), and each of extra at its Path.
// Each binary must be a static Linux executable (CGO_ENABLED=0 go build
// ./cmd/curator): the image has nothing else in it, no C library either.
func WriteBuildContext(w io.Writer, binary string, extra ...ImageFile) error {
	files := append([]ImageFile{{Source: binary, Path: "/curator"}}, extra...)
	if err := checkImageFiles(extra); err != nil {
		return err
	}
	for _, f := range files {
		if err := checkStatic(f.Source); err != nil {
			return err
		}
	}
	now := time.Now()
	tw := tar.NewWriter(w)
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(dockerfile)), ModTime: now}); err != nil {
		return err
	}
	if _, err := tw.Write(dockerfile); err != nil {
		return err
	}
	dirs := map[string]bool{}
	dir := func(name string, mode int64) error {
		if dirs[name] {
			return nil
		}
		dirs[name] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "rootfs" + name + "/", Mode: mode, ModTime: now})
	}
	if err := dir("", 0o755); err != nil {
		return err
	}
	if err := dir("/tmp", 0o1777); err != nil {
		return err
	}
	for _, f := range files {
		// The parents first, each once, so that the daemon makes none
		// with a mode of its own choosing.
		var parents []string
		for p := path.Dir(f.Path); p != "/"; p = path.Dir(p) {
			parents = append(parents, p)
		}
		for _, p := range slices.Backward(parents) {
			if err := dir(p, 0o755); err != nil {
				return err
			}
		}
		if err := addFile(tw, "rootfs"+f.Path, f.Source); err != nil {
			return err
		}
	}
	return tw.Close()
}

// addFile writes the file at src to tw as name, an executable.
func addFile(tw *tar.Writer, name, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: info.Size(), ModTime: info.ModTime()}); err != nil {
		return err
	}
	if _, err := io.Copy(tw, f); err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	return nil
}

// checkImageFiles says what is wrong with the paths of extra, if
// anything: each must be absolute and clean, and clear of the image's
// other files and of the dirs the container has of its own.
func checkImageFiles(extra []ImageFile) error {
	own := []string{"/tmp", DefaultDataDir}
	taken := []string{"/curator"}
	var errs []error
	for _, f := range extra {
		p := f.Path
		switch {
		case !path.IsAbs(p) || path.Clean(p) != p || p == "/":
			errs = append(errs, fmt.Errorf("image file %q: want an absolute, clean path", p))
		case slices.ContainsFunc(own, func(d string) bool { return inDir(p, d) || inDir(d, p) }):
			errs = append(errs, fmt.Errorf("image file %s: /tmp and %s are the container's", p, DefaultDataDir))
		case slices.ContainsFunc(taken, func(o string) bool { return inDir(p, o) || inDir(o, p) }):
			errs = append(errs, fmt.Errorf("image file %s: clashes with another file of the image (%s)", p, strings.Join(taken, ", ")))
		}
		taken = append(taken, p)
	}
	return errors.Join(errs...)
}

// inDir says whether p is dir or in it.
func inDir(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
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

// BuildImage builds Config.Image from binary, with the files of extra
// beside it (see WriteBuildContext), with the daemon's builder, and
// returns the image's ID. labels go on the image. It needs no docker CLI
// and pulls nothing.
func (p *Provider) BuildImage(ctx context.Context, binary string, labels map[string]string, extra ...ImageFile) (string, error) {
	var buf bytes.Buffer
	if err := WriteBuildContext(&buf, binary, extra...); err != nil {
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
