// Package layercheck reads the Go files of a package (not its tests) and
// reports what its layer forbids: imports, package functions and methods
// it must not call, and string literals it must not hold. The curator's
// layers (curator/spec, curator/decide, curator/store and the runtime)
// each state their rules in a test with it, so that a change that breaks
// one fails the build's tests, not a review.
package layercheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Rules are what a layer's files must not hold.
type Rules struct {
	// Imports are import path prefixes the package must not import.
	Imports []string
	// Calls are package-qualified names ("consensus.AddLearner", by the
	// name the file imports the package as) the package must not use.
	Calls []string
	// Methods are method names it must not call, on any receiver.
	Methods []string
	// Literals are substrings no string literal of it may contain.
	Literals []string
	// Owners are the files (base names) the rules do not apply to: the
	// one place a call is allowed, such as the part that fences it.
	Owners []string
}

// Check reports, as errors of t, every place in the non-test Go files of
// dir that breaks r, with why: a line a reader can go to, and the rule.
// It fails if dir holds no Go file, so that a check that reads nothing
// cannot pass.
func Check(t testing.TB, dir string, why string, r Rules) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	read := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || slices.Contains(r.Owners, filepath.Base(name)) {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		read++
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range r.Imports {
				if strings.HasPrefix(path, bad) {
					t.Errorf("%s: imports %s: %s", fset.Position(imp.Pos()), path, why)
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ImportSpec:
				return false // checked above, by path
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && slices.Contains(r.Calls, x.Name+"."+n.Sel.Name) {
					t.Errorf("%s: uses %s.%s: %s", fset.Position(n.Pos()), x.Name, n.Sel.Name, why)
				}
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && slices.Contains(r.Methods, sel.Sel.Name) {
					if _, pkg := sel.X.(*ast.Ident); !pkg || !isImport(f, sel.X.(*ast.Ident).Name) {
						t.Errorf("%s: calls .%s: %s", fset.Position(n.Pos()), sel.Sel.Name, why)
					}
				}
			case *ast.BasicLit:
				if n.Kind == token.STRING {
					for _, bad := range r.Literals {
						if strings.Contains(n.Value, bad) {
							t.Errorf("%s: a string holding %q: %s", fset.Position(n.Pos()), bad, why)
						}
					}
				}
			}
			return true
		})
	}
	if read == 0 {
		t.Fatalf("%s holds no Go file to check (run from the package's directory)", dir)
	}
}

// isImport says whether name is the name file f imports a package as.
func isImport(f *ast.File, name string) bool {
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		local := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			local = imp.Name.Name
		}
		if local == name {
			return true
		}
	}
	return false
}
