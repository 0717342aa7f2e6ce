package client

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/google/go-cmp/cmp"

	"github.com/curatorproject/curator/curator/spec"
	pb "github.com/curatorproject/curator/proto"
)

// checkReadable fails t unless err reads as one short message: a bad
// value is quoted cut short, never whole, and never raw.
func checkReadable(t *testing.T, what string, err error) {
	t.Helper()
	msg := err.Error()
	if strings.TrimSpace(msg) == "" {
		t.Fatalf("%s: an empty error", what)
	}
	if len(msg) > 1024 {
		t.Fatalf("%s: an error of %d bytes: %.200q...", what, len(msg), msg)
	}
	if i := strings.IndexFunc(msg, unicode.IsControl); i >= 0 {
		t.Fatalf("%s: a control character in the error: %q", what, msg)
	}
}

// FuzzLoadConfig: a client config file is either refused, naming the
// file, or it is a valid config that Save writes and LoadConfig reads
// back the same.
func FuzzLoadConfig(f *testing.F) {
	for _, s := range []string{
		"cluster_id: c1\nmanagers:\n- 127.0.100.10:7000\n- 127.0.100.11:7000\nca: ca.crt\ncert: admin.crt\nkey: admin.key\n",
		"managers: [\"[::1]:7000\"]\nca: /abs/ca.crt\ncert: a\nkey: b\n",
		"cluster_id: 12\nmanagers: [a]\nca: 'x: y'\ncert: \"#\"\nkey: \"\\n\"\n",
		"managers: []\nca: a\ncert: b\nkey: c\n",
		"managers: [\"\"]\nca: a\ncert: b\nkey: c\n",
		"managers: a\nca: a\ncert: b\nkey: c\n",
		"manager: [a]\nca: a\ncert: b\nkey: c\n",
		"managers: [a]\nca: a\nca: b\ncert: b\nkey: c\n",
		"{\"managers\": [\"a\"], \"ca\": \"a\", \"cert\": \"b\", \"key\": \"c\"}",
		"- a\n",
		"",
		"\x00",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "in.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := LoadConfig(path)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("LoadConfig refused %q without naming the file: %v", data, err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("LoadConfig accepted a config that does not validate: %v", err)
		}
		out := filepath.Join(dir, "out.yaml")
		if err := cfg.Save(out); err != nil {
			t.Fatalf("Save an accepted config: %v", err)
		}
		again, err := LoadConfig(out)
		if err != nil {
			saved, _ := os.ReadFile(out)
			t.Fatalf("LoadConfig of what Save wrote: %v\n%s", err, saved)
		}
		if d := cmp.Diff(cfg, again); d != "" {
			t.Fatalf("Save then LoadConfig changed the config (-loaded +again):\n%s", d)
		}
	})
}

// FuzzNodeUpdate: what `curator node update` and `token show` accept from
// the operator (client/input.go), the leader accepts too
// (spec.CheckManagementRequest), and a label the leader would accept
// the client does not refuse; a refusal is one short line.
func FuzzNodeUpdate(f *testing.F) {
	f.Add("drain", "tier=web,a/b=", "old", "worker")
	f.Add("", "k=v", "k", "manager")
	f.Add("pause", "k=v,k=w", "", "Manager")
	f.Add("active", "=v,k", "x=y", "")
	f.Add("hold", "bad key=x", "a\nb", "admin")
	f.Add("", "", "", "worker ")
	f.Fuzz(func(t *testing.T, avail, add, rm, role string) {
		if err := CheckTokenRole(role); err != nil {
			checkReadable(t, "CheckTokenRole", err)
		} else if err := spec.CheckManagementRequest(&pb.GetTokenRequest{Role: role}); err != nil {
			t.Fatalf("the client takes token role %q, the leader refuses it: %v", role, err)
		}

		split := func(s string) []string {
			if s == "" {
				return nil
			}
			return strings.Split(s, ",")
		}
		u := NodeUpdate{}
		var err error
		if avail != "" {
			if u.Availability, err = ParseAvailability(avail); err != nil {
				checkReadable(t, "ParseAvailability", err)
				return
			}
		}
		kvs := split(add)
		if u.LabelAdd, err = ParseLabels(kvs); err != nil {
			checkReadable(t, "ParseLabels", err)
			// A label the leader takes is refused only when given twice
			// with two values.
			seen := map[string]string{}
			for _, kv := range kvs {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" || spec.ValidateLabel(k, v) != nil {
					return
				}
				if old, dup := seen[k]; dup && old != v {
					return
				}
				seen[k] = v
			}
			t.Fatalf("ParseLabels(%q) refuses labels the leader takes: %v", kvs, err)
		}
		if u.LabelRm, err = ParseLabelKeys(split(rm)); err != nil {
			checkReadable(t, "ParseLabelKeys", err)
			return
		}
		if err := u.Validate(); err != nil {
			if !errors.Is(err, ErrNothingToChange) {
				checkReadable(t, "NodeUpdate.Validate", err)
			}
			return
		}
		req := &pb.UpdateNodeRequest{Id: "n", Availability: u.Availability, LabelAdd: u.LabelAdd, LabelRm: u.LabelRm}
		if err := spec.CheckManagementRequest(req); err != nil {
			t.Fatalf("the client takes %+v, the leader refuses it: %v", u, err)
		}
	})
}
