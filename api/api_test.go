// Package api holds the baseline of the library's exported API, kafkanet.txt,
// and the test that keeps the code and the baseline in step: an exported
// identifier added, removed or changed fails the test until the baseline
// changes with it, in the same reviewed change (see CONTRIBUTING.md).
//
//	go test ./api                            # check
//	KAFKANET_API_UPDATE=1 go test ./api      # rewrite kafkanet.txt from the code
package api

import (
	"bufio"
	"bytes"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const (
	module   = "github.com/kafkanet/kafkanet"
	baseline = "kafkanet.txt"
)

// TestAPIBaseline fails when the exported API of the library's packages
// differs from the baseline, and says which lines were added and removed.
func TestAPIBaseline(t *testing.T) {
	got, err := exportedAPI()
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("KAFKANET_API_UPDATE") != "" {
		if err := os.WriteFile(baseline, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s: %d lines", baseline, len(got))
		return
	}
	b, err := os.ReadFile(baseline)
	if err != nil {
		t.Fatalf("%v (KAFKANET_API_UPDATE=1 go test ./api writes it)", err)
	}
	want := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	added, removed := diff(want, got)
	if len(added)+len(removed) == 0 {
		return
	}
	var msg strings.Builder
	msg.WriteString("the exported API differs from api/" + baseline + ":\n")
	for _, l := range removed {
		msg.WriteString("  - " + l + "\n")
	}
	for _, l := range added {
		msg.WriteString("  + " + l + "\n")
	}
	msg.WriteString("If the change is on purpose, rewrite the baseline with KAFKANET_API_UPDATE=1 go test ./api,\n" +
		"commit it with the change and add a line to CHANGELOG.md (CONTRIBUTING.md says what may change).")
	t.Error(msg.String())
}

// TestNoMutableVariable fails when the library exports a variable other
// than an error: a variable is state one user may change under every
// other user of the package; a constant, a function or an option says the
// same without it.
func TestNoMutableVariable(t *testing.T) {
	lines, err := exportedAPI()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		if _, decl, ok := strings.Cut(l, ", var "); ok && !strings.HasSuffix(decl, " error") {
			t.Errorf("exported variable: %s (make it a constant, a function or an option)", l)
		}
	}
}

// diff returns the lines of got not in want, and of want not in got; both
// are sorted.
func diff(want, got []string) (added, removed []string) {
	in := func(s []string, l string) bool { _, ok := slices.BinarySearch(s, l); return ok }
	for _, l := range got {
		if !in(want, l) {
			added = append(added, l)
		}
	}
	for _, l := range want {
		if !in(got, l) {
			removed = append(removed, l)
		}
	}
	return added, removed
}

// exportedAPI lists, one line each and sorted, every exported constant,
// variable, function, type, field and method of the library's packages
// (internal ones, but for internal/configerr whose Error is config.Error,
// and this test-only one, aside), from the compiler's export data: the module alone,
// without the workspace, as an importer builds it.
func exportedAPI() ([]string, error) {
	cmd := exec.Command("go", "list", "-deps", "-export", "-f", "{{.ImportPath}}\t{{.Export}}\t{{.Module}}", module+"/...")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %v\n%s", err, stderr.String())
	}
	exports := map[string]string{}
	var ours []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 3 {
			continue
		}
		exports[f[0]] = f[1]
		exposed := f[0] == module+"/internal/configerr" // config.Error is an alias of its Error
		if (f[0] == module || strings.HasPrefix(f[0], module+"/")) && (exposed || !strings.Contains(f[0]+"/", "/internal/")) && f[1] != "" {
			ours = append(ours, f[0])
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok || file == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
	var lines []string
	for _, path := range ours {
		pkg, err := imp.Import(path)
		if err != nil {
			return nil, err
		}
		lines = append(lines, packageAPI(pkg)...)
	}
	slices.Sort(lines)
	return slices.Compact(lines), nil
}

// packageAPI lists pkg's exported API.
func packageAPI(pkg *types.Package) []string {
	name := strings.TrimPrefix(strings.TrimPrefix(pkg.Path(), module), "/")
	qual := func(p *types.Package) string {
		if p == pkg {
			return ""
		}
		return strings.TrimPrefix(p.Path(), module+"/")
	}
	str := func(x any) string {
		switch x := x.(type) {
		case *types.Signature:
			return signature(x, qual)
		case types.Type:
			return types.TypeString(x, qual)
		case *types.Func:
			return "func " + x.Name() + signature(x.Type().(*types.Signature), qual)
		case types.Object:
			return types.ObjectString(x, qual)
		}
		return ""
	}
	prefix := "pkg " + name + ", "
	var out []string
	scope := pkg.Scope()
	for _, n := range scope.Names() {
		obj := scope.Lookup(n)
		if !obj.Exported() {
			continue
		}
		tn, ok := obj.(*types.TypeName)
		if !ok {
			out = append(out, prefix+str(obj))
			continue
		}
		typ := tn.Type()
		head := prefix + "type " + n
		if tn.IsAlias() {
			out = append(out, head+" = "+str(types.Unalias(typ)))
			continue
		}
		if named, ok := typ.(*types.Named); ok && named.TypeParams().Len() > 0 {
			var tps []string
			for i := range named.TypeParams().Len() {
				tp := named.TypeParams().At(i)
				tps = append(tps, tp.Obj().Name()+" "+str(tp.Constraint()))
			}
			head += "[" + strings.Join(tps, ", ") + "]"
		}
		switch u := typ.Underlying().(type) {
		case *types.Struct:
			out = append(out, head+" struct")
			for i := range u.NumFields() {
				if f := u.Field(i); f.Exported() {
					field := f.Name() + " " + str(f.Type())
					if f.Embedded() {
						field = "embedded " + str(f.Type())
					}
					out = append(out, head+" struct, "+field)
				}
			}
		case *types.Interface:
			out = append(out, head+" interface")
			for i := range u.NumMethods() {
				if m := u.Method(i); m.Exported() {
					out = append(out, head+" interface, "+m.Name()+str(m.Type()))
				}
			}
			continue // an interface's methods are listed above
		default:
			out = append(out, head+" "+str(u))
		}
		ms := types.NewMethodSet(types.NewPointer(typ))
		for i := range ms.Len() {
			m := ms.At(i).Obj()
			if !m.Exported() {
				continue
			}
			recv := n
			if sig := m.Type().(*types.Signature); sig.Recv() != nil {
				if _, ptr := sig.Recv().Type().(*types.Pointer); ptr {
					recv = "*" + n
				}
			}
			out = append(out, prefix+"method ("+recv+") "+m.Name()+str(m.Type()))
		}
	}
	return out
}

// signature writes a function's parameters and results without their
// names, which are no part of the API.
func signature(sig *types.Signature, qual types.Qualifier) string {
	tuple := func(t *types.Tuple, variadic bool) string {
		var parts []string
		for i := range t.Len() {
			typ := t.At(i).Type()
			if variadic && i == t.Len()-1 {
				parts = append(parts, "..."+types.TypeString(typ.(*types.Slice).Elem(), qual))
				continue
			}
			parts = append(parts, types.TypeString(typ, qual))
		}
		return strings.Join(parts, ", ")
	}
	s := "(" + tuple(sig.Params(), sig.Variadic()) + ")"
	switch r := sig.Results(); r.Len() {
	case 0:
	case 1:
		s += " " + tuple(r, false)
	default:
		s += " (" + tuple(r, false) + ")"
	}
	return s
}
