package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/semver"
)

// PreviousReleaseFile is the file, from the repository's root, that names
// the previous release's commit: the first line that is not a comment
// (#) nor blank is its full hash.
const PreviousReleaseFile = "test/testdata/previous-release"

// previousReleaseMu keeps the tests of one process from building the
// previous release twice at once, and a lock file beside the binary those
// of several processes (the e2e tests and the bench's, run at once by go
// test): a build takes both cores for a minute.
var previousReleaseMu sync.Mutex

// PreviousRelease is the curator binary of the previous release, for the
// upgrade tests, and that release's commit (PreviousReleaseFile). It
// builds the binary from the commit's tree in git history, the first time,
// into the user's cache dir (curator-test/previous-<commit>/curator), and
// reuses it after that: the commit's tree never changes. It fails the
// test when the history lacks the commit (a shallow clone).
func PreviousRelease(t testing.TB) (bin, commit string) {
	t.Helper()
	start := time.Now()
	bin, commit, built, err := PreviousReleaseBinary()
	if err != nil {
		t.Fatal(err)
	}
	if built {
		t.Logf("previous release %.12s: built %s in %s", commit, bin, time.Since(start).Round(time.Second))
	} else {
		t.Logf("previous release %.12s: reusing %s", commit, bin)
	}
	return bin, commit
}

// PreviousReleaseBinary is PreviousRelease for a program (the upgrade
// benchmark): built says whether it was built now, rather than taken
// from the cache.
func PreviousReleaseBinary() (bin, commit string, built bool, err error) {
	previousReleaseMu.Lock()
	defer previousReleaseMu.Unlock()

	root, err := gitOutput("", "rev-parse", "--show-toplevel")
	if err != nil {
		return "", "", false, fmt.Errorf("the previous release is built from git history, and this is not a git checkout: %v", err)
	}
	f, err := os.Open(filepath.Join(root, PreviousReleaseFile))
	if err != nil {
		return "", "", false, err
	}
	commit, err = ParsePreviousRelease(f)
	f.Close()
	if err != nil {
		return "", "", false, fmt.Errorf("%s: %v", PreviousReleaseFile, err)
	}
	if _, err := gitOutput(root, "cat-file", "-e", commit+"^{commit}"); err != nil {
		return "", "", false, fmt.Errorf("the previous release %s (%s) is not in this clone's history: fetch the full history "+
			"(git fetch --unshallow, or git fetch origin %s)", commit, PreviousReleaseFile, commit)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", "", false, err
	}
	bin = filepath.Join(cache, "curator-test", "previous-"+commit, "curator")
	if _, err := os.Stat(bin); err == nil {
		return bin, commit, false, nil
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", "", false, err
	}
	unlock, err := lockFile(bin + ".lock")
	if err != nil {
		return "", "", false, err
	}
	defer unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin, commit, false, nil // another process built it meanwhile
	}
	if _, err := buildPreviousRelease(root, commit, bin); err != nil {
		return "", "", false, fmt.Errorf("build the previous release %s: %v", commit, err)
	}
	return bin, commit, true, nil
}

var fullHash = regexp.MustCompile(`^[0-9a-f]{40}$`)

// ParsePreviousRelease reads a PreviousReleaseFile: the first line that is
// neither blank nor a comment is the commit's full hash.
func ParsePreviousRelease(r io.Reader) (string, error) {
	s := bufio.NewScanner(r)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !fullHash.MatchString(line) {
			return "", fmt.Errorf("%q is not a full commit hash (40 hex digits)", line)
		}
		return line, nil
	}
	if err := s.Err(); err != nil {
		return "", err
	}
	return "", errors.New("no commit hash: every line is blank or a comment")
}

// buildPreviousRelease extracts commit's tree from the repository at root
// (git archive, so nothing of the checkout leaks in) and builds its
// ./cmd/curator, static, into bin. It builds into a temporary file beside
// bin and renames it, so that a build killed halfway leaves at most a
// *.partial file, never a binary a later run would take for whole. It
// returns the release it stamped.
func buildPreviousRelease(root, commit, bin string) (string, error) {
	src, err := os.MkdirTemp("", "curator-previous-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(src)
	tarball := filepath.Join(src, "tree.tar")
	if _, err := gitOutput(root, "archive", "--output", tarball, commit); err != nil {
		return "", err
	}
	tree := filepath.Join(src, "tree")
	if err := os.Mkdir(tree, 0o755); err != nil {
		return "", err
	}
	if b, err := exec.Command("tar", "-x", "-f", tarball, "-C", tree).CombinedOutput(); err != nil {
		return "", fmt.Errorf("tar -x: %w\n%s", err, b)
	}

	// Stamp only the variables the old main package declares: the linker
	// ignores -X of one that does not exist without a word. An old node
	// reports main.version as its release, in its RegisterRequest and in
	// every HeartbeatRequest.
	vars, err := packageVars(filepath.Join(tree, "cmd", "curator"))
	if err != nil {
		return "", err
	}
	release := previousReleaseName(root, commit)
	var ldflags []string
	if vars["version"] {
		ldflags = append(ldflags, "-X main.version="+release)
	} else {
		release = "(unstamped: its cmd/curator has no version variable)"
	}
	if vars["commit"] {
		ldflags = append(ldflags, "-X main.commit="+commit)
	}

	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(filepath.Dir(bin), "curator-*.partial")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name()) // after the rename, there is nothing to remove
	build := exec.Command("go", "build", "-buildvcs=false", "-ldflags", strings.Join(ldflags, " "), "-o", tmp.Name(), "./cmd/curator")
	build.Dir = tree
	// The old tree is a module of its own: no go.work of this checkout's
	// may pull this module's packages into it.
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
	if b, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(build.Args[1:], " "), err, b)
	}
	if err := os.Rename(tmp.Name(), bin); err != nil {
		return "", err
	}
	return release, nil
}

// previousReleaseName is the release the previous release's binary says it
// is: the semver tag on its commit, as a release is tagged; else (a
// commit from before the first release) v0.0.0-dev+<commit>, which the
// version policy judges as semver and orders before any release of this
// tree. It is decided at the first build: a tag added later is seen once
// the cached binary is removed.
func previousReleaseName(root, commit string) string {
	tags, _ := gitOutput(root, "tag", "--points-at", commit)
	for _, tag := range strings.Fields(tags) {
		if semver.IsValid(tag) && semver.Prerelease(tag) == "" {
			return tag
		}
	}
	return "v0.0.0-dev+" + commit[:12]
}

// packageVars is the names of the package-level variables declared in
// the non-test Go files of dir.
func packageVars(dir string) (map[string]bool, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	vars := map[string]bool{}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.VAR {
				continue
			}
			for _, spec := range gen.Specs {
				for _, n := range spec.(*ast.ValueSpec).Names {
					vars[n.Name] = true
				}
			}
		}
	}
	return vars, nil
}

// gitOutput runs git with args in dir ("" for the working directory) and
// returns its output, trimmed.
func gitOutput(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// BinaryRelease is the release a curator binary says it is: the first
// line of `curator version`, without its "curator ".
func BinaryRelease(bin string) (string, error) {
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		return "", fmt.Errorf("%s version: %w", bin, err)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimPrefix(strings.TrimSpace(first), "curator "), nil
}
