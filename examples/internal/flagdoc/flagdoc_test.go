package flagdoc

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// recorder collects what Check reports instead of failing the test.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// program writes a main package whose documentation is doc, with a test
// file whose documentation go doc ignores, and returns its directory.
func program(t *testing.T, doc string) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("main.go", doc+"package main\n\nfunc main() {}\n")
	write("other.go", "package main\n")
	write("main_test.go", "// The flags are:\n//\n//\t-ignored\n//\t\tNot the program's documentation.\npackage main\n")
	return dir
}

const documented = `// Command x does things.
//
// Usage:
//
//	x [-a n] [--long-name]
//
// The flags are:
//
//	-a n
//		The a of it, not -b.
//	--long-name
//		A flag written with two dashes.
//	-config.file path
//		A name with a dot.
`

func flags() *flag.FlagSet {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Int("a", 0, "the `n` of it,\nover two lines")
	fs.Bool("long-name", false, "a flag")
	fs.Duration("config.file", time.Second, "a name with a dot")
	return fs
}

func TestFlagsOfDocAndUsage(t *testing.T) {
	dir := program(t, documented)
	if got, want := DocFlags(Doc(t, dir)), []string{"a", "long-name", "config.file"}; !slices.Equal(got, want) {
		t.Errorf("DocFlags = %q, want %q", got, want)
	}
	fs := flags()
	usage := Usage(fs)
	if got, want := UsageFlags(usage), []string{"a", "config.file", "long-name"}; !slices.Equal(got, want) {
		t.Errorf("UsageFlags = %q, want %q, of:\n%s", got, want, usage)
	}
	if fs.Output() != io.Discard {
		t.Error("Usage left the FlagSet's output changed")
	}
	r := &recorder{TB: t}
	Check(r, dir, fs, usage)
	if len(r.errors) > 0 {
		t.Errorf("Check of a program that lists its flags reported %q", r.errors)
	}
}

func TestCheckReportsWhatIsNotListed(t *testing.T) {
	dir := program(t, documented+"//\t-a n\n//\t\tListed twice.\n")
	fs := flags()
	fs.String("added", "", "a flag defined after the documentation was written")
	usage := "usage: x\n  -a n\n  -gone\n"
	r := &recorder{TB: t}
	Check(r, dir, fs, usage)
	if len(r.errors) != 2 {
		t.Fatalf("Check reported %d errors, want one for the documentation and one for the usage: %q", len(r.errors), r.errors)
	}
	doc, use := r.errors[0], r.errors[1]
	for _, want := range []string{"package documentation", "missing [added]", "not flags []", "listed twice [a]"} {
		if !strings.Contains(doc, want) {
			t.Errorf("the documentation's report lacks %q: %s", want, doc)
		}
	}
	for _, want := range []string{"usage (-h)", "missing [added config.file long-name]", "not flags [gone]"} {
		if !strings.Contains(use, want) {
			t.Errorf("the usage's report lacks %q: %s", want, use)
		}
	}
}
