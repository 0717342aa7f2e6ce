package client

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWriteAdminConfigRoundTrip(t *testing.T) {
	ca := newCA(t)
	path := writeConfig(t, ca, "127.0.100.10:7000", "127.0.100.11:7000")
	dir := filepath.Dir(path)
	if got, want := path, filepath.Join(dir, "config.yaml"); got != want {
		t.Errorf("path = %s, want %s", got, want)
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		ClusterID: "c1",
		Managers:  []string{"127.0.100.10:7000", "127.0.100.11:7000"},
		CA:        "ca.crt",
		Cert:      "admin.crt",
		Key:       "admin.key",
	}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("LoadConfig (-want +got):\n%s", diff)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	wantYAML := `cluster_id: c1
managers:
- 127.0.100.10:7000
- 127.0.100.11:7000
ca: ca.crt
cert: admin.crt
key: admin.key
`
	if diff := cmp.Diff(wantYAML, string(raw)); diff != "" {
		t.Errorf("config.yaml (-want +got):\n%s", diff)
	}
	for name, mode := range map[string]os.FileMode{"config.yaml": 0o600, "admin.key": 0o600, "admin.crt": 0o644, "ca.crt": 0o644} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Error(err)
			continue
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s mode = %v, want %v", name, fi.Mode().Perm(), mode)
		}
	}

	// Absolute paths survive a Save and a Load, and still work from
	// another folder.
	abs := &Config{
		ClusterID: "c1",
		Managers:  want.Managers,
		CA:        filepath.Join(dir, "ca.crt"),
		Cert:      filepath.Join(dir, "admin.crt"),
		Key:       filepath.Join(dir, "admin.key"),
	}
	other := filepath.Join(t.TempDir(), "nested", "client.yaml")
	if err := abs.Save(other); err != nil {
		t.Fatal(err)
	}
	got, err := LoadConfig(other)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(abs, got); diff != "" {
		t.Errorf("Save then LoadConfig (-want +got):\n%s", diff)
	}
	if _, err := got.tlsConfig(other); err != nil {
		t.Errorf("credentials from absolute paths: %v", err)
	}
	if _, err := cfg.tlsConfig(path); err != nil {
		t.Errorf("credentials from relative paths: %v", err)
	}
}

func TestLoadConfigErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		content *string // nil: no file
		want    string
	}{
		{name: "missing", want: "no client config at " + filepath.Join(dir, "missing") + ": run `curator agent init` or pass --config"},
		{name: "not yaml", content: ptr("managers: [\n"), want: "client config " + filepath.Join(dir, "not yaml")},
		{name: "unknown field", content: ptr("cluster_id: c\nmanagers: [a:1]\nca: a\ncert: b\nkey: c\nmanager: x\n"), want: `unknown field "manager"`},
		{name: "no managers", content: ptr("cluster_id: c\nca: a\ncert: b\nkey: c\n"), want: `missing ["managers"]`},
		{name: "no key", content: ptr("cluster_id: c\nmanagers: [a:1]\nca: a\ncert: b\n"), want: `missing ["key"]`},
		{name: "empty address", content: ptr("managers: ['']\nca: a\ncert: b\nkey: c\n"), want: "empty address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name)
			if tc.content != nil {
				if err := os.WriteFile(path, []byte(*tc.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := LoadConfig(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("LoadConfig error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestDefaultConfigPath(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv(EnvConfig, "")
	if got, want := DefaultConfigPath(), filepath.Join(home, ".config", "curator", "config.yaml"); got != want {
		t.Errorf("DefaultConfigPath() = %s, want %s", got, want)
	}
	t.Setenv(EnvConfig, "/etc/curator/admin.yaml")
	if got, want := DefaultConfigPath(), "/etc/curator/admin.yaml"; got != want {
		t.Errorf("DefaultConfigPath() with $%s = %s, want %s", EnvConfig, got, want)
	}
}

func TestCachePath(t *testing.T) {
	if got, want := CachePath("/d/config.yaml"), "/d/config.yaml.managers.json"; got != want {
		t.Errorf("CachePath = %s, want %s", got, want)
	}
}

func ptr[T any](v T) *T { return &v }

// The hand-ordered YAML must read back as what was saved, whatever the
// values hold.
func TestSaveQuotesValues(t *testing.T) {
	c := &Config{
		ClusterID: "#not a comment: [x]",
		Managers:  []string{"[::1]:7000", "host:7000"},
		CA:        "/a b/ca.crt",
		Cert:      "yes",
		Key:       "'k'",
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := c.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(c, got); diff != "" {
		t.Errorf("LoadConfig after Save (-want +got):\n%s", diff)
	}
}
