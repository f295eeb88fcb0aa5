// Package apicheck holds checks of an exported API that the library's
// baseline test (package api) makes from export data, for the modules
// outside the baseline (the plugins), which run them from their sources.
package apicheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
)

// MutableVars returns the exported package-level variables declared in
// the Go files of dir (its tests aside), other than errors: a variable
// whose declared type is error, or whose value is a call of errors.New or
// fmt.Errorf. Any other exported variable is state a user may change
// under every other user of the package: a constant, a function or an
// option says the same without it.
func MutableVars(dir string) ([]string, error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var found []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, 0)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, s := range g.Specs {
				v := s.(*ast.ValueSpec)
				for i, n := range v.Names {
					if n.IsExported() && !isError(v, i) {
						found = append(found, fmt.Sprintf("%s: var %s", fset.Position(n.Pos()), n.Name))
					}
				}
			}
		}
	}
	return found, nil
}

// isError reports whether the i-th variable of v is an error.
func isError(v *ast.ValueSpec, i int) bool {
	if id, ok := v.Type.(*ast.Ident); ok {
		return id.Name == "error"
	}
	if v.Type != nil || i >= len(v.Values) {
		return false
	}
	call, ok := v.Values[i].(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && (pkg.Name == "errors" && sel.Sel.Name == "New" || pkg.Name == "fmt" && sel.Sel.Name == "Errorf")
}
