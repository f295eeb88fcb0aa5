// Package flagdoc checks, in the tests of the example programs, that a
// program's documentation lists every flag it defines, and no other: its
// package documentation, which go doc prints, and its usage, which -h
// prints.
//
// The package documentation lists the flags as gofmt's does: after a line
// such as "The flags are:", a code block with one entry per flag, the
// flag at the start of its line (one tab in, "-name" or "--name", then
// its argument if it has one) and its description on the lines below,
// one tab further in:
//
//	-config file
//		Read settings from the Java .properties file.
//
// The usage lists them as flag.PrintDefaults does: "  -name" at the start
// of a line.
package flagdoc

import (
	"bytes"
	"flag"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	// docEntry is a flag's entry in the package documentation's list.
	docEntry = regexp.MustCompile(`(?m)^\t--?([A-Za-z0-9][A-Za-z0-9_.-]*)(?:[ \t]|$)`)
	// usageEntry is a flag's entry in flag.PrintDefaults' output.
	usageEntry = regexp.MustCompile(`(?m)^  --?([A-Za-z0-9][A-Za-z0-9_.-]*)(?:[ \t]|$)`)
)

// Doc returns the package documentation of the program in dir as go doc
// reads it: the doc comments of its non-test Go files.
func Doc(t testing.TB, dir string) string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			t.Fatalf("parsing %s: %v", name, err)
		}
		if f.Name.Name != "main" {
			t.Fatalf("%s is of package %s, not of a program", name, f.Name.Name)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatalf("%s holds no Go file", dir)
	}
	p, err := doc.NewFromFiles(fset, files, "main")
	if err != nil {
		t.Fatalf("reading the documentation of %s: %v", dir, err)
	}
	return p.Doc
}

// DocFlags returns the flags the list of a package documentation names,
// in order.
func DocFlags(text string) []string { return entries(docEntry, text) }

// UsageFlags returns the flags a usage text (flag.PrintDefaults' form)
// names, in order.
func UsageFlags(text string) []string { return entries(usageEntry, text) }

// Names returns the names of the flags fs defines, in lexical order.
func Names(fs *flag.FlagSet) []string {
	var out []string
	fs.VisitAll(func(f *flag.Flag) { out = append(out, f.Name) })
	return out
}

// Usage returns what fs.Usage writes: what -h prints.
func Usage(fs *flag.FlagSet) string {
	var b bytes.Buffer
	out := fs.Output()
	fs.SetOutput(&b)
	fs.Usage()
	fs.SetOutput(out)
	return b.String()
}

// Check asserts that the package documentation of the program in dir and
// usage, the text its -h prints, each list exactly the flags of fs, every
// one once.
func Check(t testing.TB, dir string, fs *flag.FlagSet, usage string) {
	t.Helper()
	want := Names(fs)
	if len(want) == 0 {
		t.Fatalf("the program in %s defines no flag", dir)
	}
	CheckDoc(t, dir, want)
	same(t, "its usage (-h)", UsageFlags(usage), want, usage)
}

// CheckDoc asserts that the package documentation of the program in dir
// lists exactly the flags named in want, every one once.
func CheckDoc(t testing.TB, dir string, want []string) {
	t.Helper()
	text := Doc(t, dir)
	same(t, "its package documentation (go doc)", DocFlags(text), want, text)
}

// same reports the flags of want that listed lacks, those it names that
// are not flags, and those it names twice.
func same(t testing.TB, where string, listed, want []string, text string) {
	t.Helper()
	var missing, extra, twice []string
	for _, name := range want {
		if !slices.Contains(listed, name) {
			missing = append(missing, name)
		}
	}
	seen := map[string]bool{}
	for _, name := range listed {
		switch {
		case !slices.Contains(want, name):
			extra = append(extra, name)
		case seen[name]:
			twice = append(twice, name)
		}
		seen[name] = true
	}
	if len(missing)+len(extra)+len(twice) > 0 {
		t.Errorf("%s does not list the program's flags: missing %v, not flags %v, listed twice %v; it reads:\n%s",
			where, missing, extra, twice, text)
	}
}

func entries(re *regexp.Regexp, text string) []string {
	var out []string
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}
