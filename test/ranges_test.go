package e2e

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
)

// TestParallelTestsOwnTheirRanges: the rule of the pool (schedule_test.go), checked on
// the source: each 127.0.N. range written in this package's tests belongs
// to one function (a test, or a helper of its own). Two parallel tests on
// one range collide on its ports ("port in use"), now and then, whichever
// starts second.
func TestParallelTestsOwnTheirRanges(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	rangeOf := regexp.MustCompile(`127\.0\.([0-9]{1,3})\.?`)
	owners := map[int][]string{}
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			ast.Inspect(fn, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				for _, m := range rangeOf.FindAllStringSubmatch(lit.Value, -1) {
					octet, _ := strconv.Atoi(m[1])
					if octet == 0 || slices.Contains(owners[octet], fn.Name.Name) {
						continue // 127.0.0.x: the kernel's own loopback, for ephemeral ports
					}
					owners[octet] = append(owners[octet], fn.Name.Name)
				}
				return true
			})
		}
	}
	if len(owners) == 0 {
		t.Fatal("no 127.0.N. range found in the tests: the check reads nothing")
	}
	for octet, fns := range owners {
		if len(fns) > 1 {
			t.Errorf("127.0.%d. is written in %v: give each its own range", octet, fns)
		}
	}
}
