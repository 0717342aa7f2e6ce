package docker

import (
	"archive/tar"
	"bytes"
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
	err = WriteBuildContext(&buf, bin)
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
	tr := tar.NewReader(&buf)
	got := map[string]int64{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = h.Size
	}
	if diff := cmp.Diff(map[string]int64{"Dockerfile": int64(len(dockerfile)), "curator": int64(len(b))}, got); diff != "" {
		t.Errorf("build context (-want +got):\n%s", diff)
	}
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
