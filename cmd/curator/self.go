package main

// How to run this binary again. `agent init` and `dev` print commands for
// the operator to copy; `curator node ls` is only right when this binary is
// the `curator` on the PATH. Run with `go run ./cmd/curator dev`, it is a
// temporary build that no PATH names, so the commands say `go run` the way
// the operator started it.

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
)

// selfInfo is what selfCommandFor decides from, gathered by selfCommand.
type selfInfo struct {
	// exe is this binary's path, symlinks resolved.
	exe string
	// onPath is what `curator` on the PATH resolves to ("" if none).
	onPath string
	// cwd is the working directory.
	cwd string
	// pkg, module and version are the main package's import path, its
	// module's path and the module's version ("(devel)" when built from a
	// checkout) from the build info; empty if there is none.
	pkg, module, version string
	// moduleRoot is the directory at or above cwd whose go.mod declares
	// module ("" if none).
	moduleRoot string
}

// selfCommand is how the operator runs this binary again: "curator" when
// that is what the PATH finds, a `go run` command when this is a go run
// build, else this binary's absolute path.
func selfCommand() string {
	var in selfInfo
	if exe, err := os.Executable(); err == nil {
		in.exe = resolve(exe)
	}
	if p, err := exec.LookPath("curator"); err == nil {
		in.onPath = resolve(p)
	}
	in.cwd, _ = os.Getwd()
	if bi, ok := debug.ReadBuildInfo(); ok {
		in.pkg, in.module, in.version = bi.Path, bi.Main.Path, bi.Main.Version
	}
	if in.module != "" && in.cwd != "" {
		in.moduleRoot = findModuleRoot(in.cwd, in.module)
	}
	return selfCommandFor(in)
}

// selfCommandFor is selfCommand's decision, a pure function.
func selfCommandFor(in selfInfo) string {
	switch {
	case in.exe == "":
		return "curator"
	case in.onPath == in.exe:
		return "curator"
	case !isGoRunBuild(in.exe) || in.pkg == "":
		return shellQuote(in.exe)
	case in.moduleRoot == in.cwd:
		rel := strings.TrimPrefix(strings.TrimPrefix(in.pkg, in.module), "/")
		if rel == "" {
			return "go run ."
		}
		return "go run ./" + rel
	case in.moduleRoot != "":
		// In a folder of the module: its import path works from there.
		return "go run " + in.pkg
	case in.version != "" && in.version != "(devel)" && !strings.Contains(in.version, "+"):
		// go run MODULE/PKG@VERSION, which works anywhere.
		return "go run " + in.pkg + "@" + in.version
	}
	// Started from outside the module (go run -C, or a path): the build
	// lasts at least as long as this process, which is as long as the
	// commands are of use.
	return shellQuote(in.exe)
}

// goCacheExe is the folder name of an executable in the go build cache, where
// `go run` keeps what it builds: a 64-digit hex hash and "-d".
var goCacheExe = regexp.MustCompile(`^[0-9a-f]{64}-d$`)

// isGoRunBuild says whether exe is a binary `go run` built: in its work dir
// (.../go-buildNNN/bNNN/exe/NAME), or in the build cache
// (GOCACHE/xx/HASH-d/NAME).
func isGoRunBuild(exe string) bool {
	dir := filepath.Dir(exe)
	if filepath.Base(dir) == "exe" && strings.Contains(filepath.ToSlash(dir), "/go-build") {
		return true
	}
	return goCacheExe.MatchString(filepath.Base(dir))
}

// findModuleRoot returns the directory at or above dir whose go.mod
// declares module, or "".
func findModuleRoot(dir, module string) string {
	for {
		if declares(filepath.Join(dir, "go.mod"), module) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// declares says whether the go.mod at path declares module.
func declares(path, module string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(m), `"`) == module
		}
	}
	return false
}

func resolve(path string) string {
	if p, err := filepath.EvalSymlinks(path); err == nil {
		path = p
	}
	if p, err := filepath.Abs(path); err == nil {
		path = p
	}
	return path
}

// shellQuote quotes s for a POSIX shell if it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+=:,@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
