package layercheck

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// recorder keeps the errors Check reports instead of failing the test.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) Helper() {}

// TestOwners: a call the rules forbid is reported in every file but its
// owners, and a test file is never read.
func TestOwners(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"owner.go":     "package p\n\nfunc own(m machine) { m.Provision() }\n",
		"loop.go":      "package p\n\nfunc loop(m machine) { m.Provision(); m.List() }\n",
		"loop_test.go": "package p\n\nfunc test(m machine) { m.Provision() }\n",
		"types.go":     "package p\n\ntype machine interface{ Provision(); List() }\n",
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := &recorder{TB: t}
	Check(r, dir, "only the owner", Rules{Methods: []string{"Provision"}, Owners: []string{"owner.go"}})
	var got []string
	for _, e := range r.errs {
		got = append(got, strings.TrimPrefix(e, dir+string(filepath.Separator)))
	}
	want := []string{"loop.go:3:24: calls .Provision: only the owner"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reported (-want +got):\n%s", diff)
	}
}
