package scripts

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestMachines: what a script prints is read as machine lines, and a
// line that is not one is refused with its number and why.
func TestMachines(t *testing.T) {
	created := time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC)
	got, err := machines([]byte(`
{"id": "exec-1", "labels": {"a": "b"}, "address": "10.0.0.1:7000", "domain": "rack-1", "created": "2026-12-06T02:00:00Z"}

{"id": "exec-2"}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []machine{
		{ID: "exec-1", Labels: map[string]string{"a": "b"}, Address: "10.0.0.1:7000", Domain: "rack-1", Created: &created},
		{ID: "exec-2"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("machines (-want +got):\n%s", d)
	}
	for _, tc := range []struct{ name, out, want string }{
		{"not JSON", "{\"id\": \"a\"}\nmade it\n", "line 2 of the output is not a machine line"},
		{"no id", `{"address": "10.0.0.1:7000"}`, "line 1 of the output names no id"},
		{"a misspelt field", `{"id": "a", "adress": "10.0.0.1:7000"}`, `unknown field "adress"`},
		{"labels not a mapping", `{"id": "a", "labels": ["x"]}`, "line 1 of the output is not a machine line"},
		{"a bad time", `{"id": "a", "created": "yesterday"}`, "line 1 of the output is not a machine line"},
	} {
		if _, err := machines([]byte(tc.out)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestNewConfig: the scripts are required (last-words is not), each an
// executable file at an absolute path; each config entry is a variable of
// the scripts.
func TestNewConfig(t *testing.T) {
	dir := t.TempDir()
	_, err := New(map[string]string{"provision": "sh", "list": dir, "last-words": "/no/such", "x y": "1"})
	for _, want := range []string{`config: key "x y"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New: %v, want %q", err, want)
		}
	}
	_, err = New(map[string]string{"provision": "sh", "list": dir, "last-words": "/no/such"})
	for _, want := range []string{`provision: "sh" is not an absolute path`, "destroy: the script is required", "is not a regular file", "last-words: stat /no/such"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New: %v, want %q", err, want)
		}
	}
	p, err := New(map[string]string{"provision": "/bin/sh", "destroy": "/bin/sh", "list": "/bin/sh", "cloud-region": "eu"})
	if err != nil {
		t.Fatal(err)
	}
	if env := p.(*Provider).env; !slices.Contains(env, "CURATOR_CONFIG_CLOUD_REGION=eu") {
		t.Errorf("the scripts' variables %v lack CURATOR_CONFIG_CLOUD_REGION=eu", env)
	}
}
