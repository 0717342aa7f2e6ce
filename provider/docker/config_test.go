package docker

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"defaults", Config{}, ""},
		{"bad host", Config{Host: "nowhere"}, "docker host"},
		{"bad network", Config{Network: "-x"}, "network: name"},
		{"network with a slash", Config{Network: "a/b"}, "network: name"},
		{"not a subnet", Config{Subnet: "172.30.0.0"}, "subnet"},
		{"IPv6", Config{Subnet: "fd00::/64"}, "want an IPv4 subnet"},
		{"host bits", Config{Subnet: "172.30.0.1/24"}, "did you mean 172.30.0.0/24"},
		{"too small", Config{Subnet: "172.30.0.0/30"}, "too small"},
		{"port too high for PORT+3", Config{Port: 65533}, "not in 1..65532"},
		{"relative data dir", Config{DataDir: "data"}, "absolute path"},
		{"negative stop timeout", Config{StopTimeout: -time.Second}, "negative"},
		{"negative prune grace", Config{PruneGrace: -time.Second}, "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.cfg)
			if p != nil {
				defer p.Close()
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("New: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("New = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	t.Setenv("DOCKER_HOST", "tcp://127.0.0.1:2375")
	cfg, err := Config{HostDir: "rel"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "tcp://127.0.0.1:2375" {
		t.Errorf("Host = %q, want $DOCKER_HOST", cfg.Host)
	}
	if !filepath.IsAbs(cfg.HostDir) {
		t.Errorf("HostDir = %q, want it absolute", cfg.HostDir)
	}
	got := []any{cfg.Network, cfg.Subnet, cfg.Image, cfg.Port, cfg.DataDir, cfg.StopTimeout, cfg.PruneGrace}
	want := []any{DefaultNetwork, DefaultSubnet, DefaultImage, DefaultPort, DefaultDataDir, DefaultStopTimeout, DefaultPruneGrace}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

func TestWriteBuildContext(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "curator")
	exe, err := os.Executable() // static or not, as the test was built
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	err = WriteBuildContext(&buf, bin, ImageFile{Source: bin, Path: "/usr/local/bin/curator-provider-docker"})
	if checkStatic(exe) != nil {
		// A test binary linked with cgo (the race detector's is) is
		// refused, and said why.
		if err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
			t.Fatalf("WriteBuildContext of a dynamic binary = %v, want a refusal naming CGO_ENABLED=0", err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	// The entries, with the type and mode bits the image gets, and the
	// files' sizes.
	type entry struct {
		Type byte
		Mode int64
		Size int64
	}
	tr := tar.NewReader(&buf)
	got := map[string]entry{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = entry{h.Typeflag, h.Mode, h.Size}
	}
	want := map[string]entry{
		"Dockerfile":            {tar.TypeReg, 0o644, int64(len(dockerfile))},
		"rootfs/":               {tar.TypeDir, 0o755, 0},
		"rootfs/curator":        {tar.TypeReg, 0o755, int64(len(b))},
		"rootfs/tmp/":           {tar.TypeDir, 0o1777, 0},
		"rootfs/usr/":           {tar.TypeDir, 0o755, 0},
		"rootfs/usr/local/":     {tar.TypeDir, 0o755, 0},
		"rootfs/usr/local/bin/": {tar.TypeDir, 0o755, 0},
		"rootfs/usr/local/bin/curator-provider-docker": {tar.TypeReg, 0o755, int64(len(b))},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("build context (-want +got):\n%s", diff)
	}
}

// TestWriteBuildContextRefuses: a file of the image at a path it cannot
// have, or a file that is not a static executable, writes nothing and
// says why; a static executable at a path of its own is taken.
func TestWriteBuildContextRefuses(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "curator")
	if err := os.WriteFile(bin, staticELF(t), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		extra []ImageFile
		want  string
	}{
		{"taken", []ImageFile{{Source: bin, Path: "/bin/plugin"}, {Source: bin, Path: "/bin/other"}}, ""},
		{"relative", []ImageFile{{Source: bin, Path: "bin/plugin"}}, "absolute, clean"},
		{"unclean", []ImageFile{{Source: bin, Path: "/bin/../plugin"}}, "absolute, clean"},
		{"root", []ImageFile{{Source: bin, Path: "/"}}, "absolute, clean"},
		{"the curator binary", []ImageFile{{Source: bin, Path: "/curator"}}, "clashes"},
		{"under the curator binary", []ImageFile{{Source: bin, Path: "/curator/plugin"}}, "clashes"},
		{"twice", []ImageFile{{Source: bin, Path: "/bin/plugin"}, {Source: bin, Path: "/bin/plugin"}}, "clashes"},
		{"a file and a dir", []ImageFile{{Source: bin, Path: "/bin"}, {Source: bin, Path: "/bin/plugin"}}, "clashes"},
		{"in tmp", []ImageFile{{Source: bin, Path: "/tmp/plugin"}}, "the container's"},
		{"in the data dir", []ImageFile{{Source: bin, Path: DefaultDataDir + "/plugin"}}, "the container's"},
		{"a dir of the data dir", []ImageFile{{Source: bin, Path: "/var/lib"}}, "the container's"},
		{"not an executable", []ImageFile{{Source: script, Path: "/bin/plugin"}}, "not a Linux executable"},
		{"missing", []ImageFile{{Source: filepath.Join(dir, "nothing"), Path: "/bin/plugin"}}, "not a Linux executable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := WriteBuildContext(&buf, bin, tc.extra...)
			if tc.want == "" {
				if err != nil || buf.Len() == 0 {
					t.Errorf("WriteBuildContext with %+v = %v (%d bytes), want a context", tc.extra, err, buf.Len())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("WriteBuildContext with %+v = %v, want an error saying %q", tc.extra, err, tc.want)
			}
			if buf.Len() != 0 {
				t.Errorf("WriteBuildContext refused, yet wrote %d bytes", buf.Len())
			}
		})
	}
}

// staticELF is the smallest file checkStatic takes for a static Linux
// executable: an ELF header with no program headers.
func staticELF(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	h := elf.Header64{
		Ident:     [elf.EI_NIDENT]byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)},
		Type:      uint16(elf.ET_EXEC),
		Machine:   uint16(elf.EM_X86_64),
		Version:   uint32(elf.EV_CURRENT),
		Ehsize:    64,
		Phentsize: 56,
		Shentsize: 64,
	}
	if err := binary.Write(&b, binary.LittleEndian, h); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestWriteBuildContextNotELF(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "curator")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteBuildContext(io.Discard, bin); err == nil || !strings.Contains(err.Error(), "not a Linux executable") {
		t.Errorf("WriteBuildContext of a script = %v, want not a Linux executable", err)
	}
}

func TestReadBuildOutput(t *testing.T) {
	for _, tc := range []struct {
		name, out, wantID, wantErr string
	}{
		{"ok", `{"stream":"Step 1/4 : FROM scratch\n"}{"aux":{"ID":"sha256:abc"}}{"stream":"Successfully built abc\n"}`, "sha256:abc", ""},
		{"error", `{"stream":"Step 1/4\n"}{"errorDetail":{"message":"COPY failed"},"error":"COPY failed"}`, "", "COPY failed"},
		{"no id", `{"stream":"Step 1/4\n"}`, "", "named no image"},
		{"garbage", `{"stream":`, "", "read build output"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := readBuildOutput(strings.NewReader(tc.out))
			if id != tc.wantID {
				t.Errorf("ID = %q, want %q", id, tc.wantID)
			}
			if (tc.wantErr == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
