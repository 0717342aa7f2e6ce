package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSelfCommandFor(t *testing.T) {
	const (
		pkg     = "github.com/curatorproject/curator/cmd/curator"
		module  = "github.com/curatorproject/curator"
		tmpExe  = "/tmp/go-build3323/b001/exe/curator"
		hashExe = "/root/.cache/go-build/64/6440f4f67c6f09c7a2782f2271ef2aad35724a518eacc3d4cd4639c3eb5adaf2-d/curator"
	)
	for _, tc := range []struct {
		name string
		in   selfInfo
		want string
	}{
		{"installed, on the PATH", selfInfo{exe: "/usr/local/bin/curator", onPath: "/usr/local/bin/curator", pkg: pkg, module: module, version: "v1.0.0"}, "curator"},
		{"built, not on the PATH", selfInfo{exe: "/home/op/src/curator/curator", onPath: "/usr/local/bin/curator", pkg: pkg, module: module, version: "(devel)"}, "/home/op/src/curator/curator"},
		{"a path that needs quoting", selfInfo{exe: "/home/op/my tools/curator", pkg: pkg, module: module}, "'/home/op/my tools/curator'"},
		{"go run ./cmd/curator from the module root", selfInfo{exe: tmpExe, cwd: "/src/curator", moduleRoot: "/src/curator", pkg: pkg, module: module, version: "(devel)"}, "go run ./cmd/curator"},
		{"go run from the module root, build cached", selfInfo{exe: hashExe, cwd: "/src/curator", moduleRoot: "/src/curator", pkg: pkg, module: module, version: "(devel)"}, "go run ./cmd/curator"},
		{"go run . in the main package's folder", selfInfo{exe: tmpExe, cwd: "/src/curator/cmd/curator", moduleRoot: "/src/curator", pkg: pkg, module: module, version: "(devel)"}, "go run " + pkg},
		{"go run of the module's own main package", selfInfo{exe: tmpExe, cwd: "/src/m", moduleRoot: "/src/m", pkg: "example.com/m", module: "example.com/m", version: "(devel)"}, "go run ."},
		{"go run pkg@version from anywhere", selfInfo{exe: hashExe, cwd: "/home/op", pkg: pkg, module: module, version: "v1.2.3"}, "go run " + pkg + "@v1.2.3"},
		{"go run from outside the module, no version", selfInfo{exe: tmpExe, cwd: "/home/op", pkg: pkg, module: module, version: "(devel)"}, tmpExe},
		{"a dirty VCS version is no version to fetch", selfInfo{exe: tmpExe, cwd: "/home/op", pkg: pkg, module: module, version: "v0.0.0-20260101000000-abcdef+dirty"}, tmpExe},
		{"no executable path", selfInfo{}, "curator"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := selfCommandFor(tc.in); got != tc.want {
				t.Errorf("selfCommandFor(%+v) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestFindModuleRoot(t *testing.T) {
	root := t.TempDir()
	sub := filepath.Join(root, "cmd", "curator")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("// the module\nmodule example.com/m\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := findModuleRoot(sub, "example.com/m"); got != root {
		t.Errorf("findModuleRoot(%s) = %q, want %q", sub, got, root)
	}
	if got := findModuleRoot(sub, "example.com/other"); got != "" {
		t.Errorf("findModuleRoot for another module = %q, want none", got)
	}
}

func TestTableCellQuotesControlCharacters(t *testing.T) {
	for in, want := range map[string]string{
		"manager-1":       "manager-1",
		"fake\nrow":       `"fake\nrow"`,
		"tab\tcolumn":     `"tab\tcolumn"`,
		"bell\a":          `"bell\a"`,
		"ünïcode is fine": "ünïcode is fine",
		"":                "",
	} {
		if got := tableCell(in); got != want {
			t.Errorf("tableCell(%q) = %q, want %q", in, got, want)
		}
	}
}
