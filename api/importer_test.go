package api

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"
	modv "golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// released lists the modules a release tags, each with the directory of its
// go.mod.
var released = []struct {
	path, dir string
}{
	{module, ".."},
	{module + "/plugin/knprom", "../plugin/knprom"},
	{module + "/plugin/knotel", "../plugin/knotel"},
}

// TestPluginsBuildForImporters builds, outside the repository, a program
// that uses both plugins, resolving every module as an importer's go command
// does: from a module proxy, here a directory that serves the library and
// the plugins as this working tree would be released (the plugins at the
// version they require of the library, which a release sets to its own:
// v1.0.0, CONTRIBUTING.md) and every other module from this
// machine's module cache, with a module cache of its own and no workspace.
// A plugin that required the library at a version no proxy serves, or
// reached it only through its replace directive (which importers ignore),
// fails here.
func TestPluginsBuildForImporters(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program and its dependencies from scratch")
	}
	version := libraryVersionRequired(t, "../plugin/knprom/go.mod")
	if v := libraryVersionRequired(t, "../plugin/knotel/go.mod"); v != version {
		t.Fatalf("the plugins require different library versions: knprom %s, knotel %s", version, v)
	}
	proxy := t.TempDir()
	for _, m := range released {
		serve(t, proxy, m.path, version, m.dir)
	}

	prog := t.TempDir()
	src, err := os.ReadFile(filepath.Join("testdata", "importer", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	gomod := fmt.Sprintf("module example.com/importer\n\ngo 1.26.0\n\nrequire (\n"+
		"\t%s %s\n\t%s/plugin/knprom %s\n\t%s/plugin/knotel %s\n)\n",
		module, version, module, version, module, version)
	for name, body := range map[string][]byte{"go.mod": []byte(gomod), "main.go": src} {
		if err := os.WriteFile(filepath.Join(prog, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cache := goEnv(t, "GOMODCACHE")
	env := append(os.Environ(),
		"GOWORK=off",
		"GOFLAGS=-mod=mod -modcacherw",
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(filepath.Join(cache, "cache", "download")),
		"GONOSUMDB="+module,
		"GOSUMDB=off",
		"GOMODCACHE="+filepath.Join(t.TempDir(), "modcache"),
		"GOTOOLCHAIN=local",
	)
	for _, args := range [][]string{
		{"get", "."}, // as an importer adds a module: its packages' imports, not their tests'
		{"build", "-o", filepath.Join(prog, "importer"), "."},
		// The released modules as the importer selects them; "all" would
		// need the version information of every module in the graph, which
		// this machine's module cache need not hold.
		{"list", "-m", module, module + "/plugin/knprom", module + "/plugin/knotel"},
	} {
		cmd := exec.Command("go", args...)
		cmd.Dir = prog
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s, as an importer: %v\n%s", strings.Join(args, " "), err, out)
		}
		if args[0] == "list" {
			for _, m := range released {
				if !strings.Contains(string(out), m.path+" "+version+"\n") {
					t.Errorf("the importer's build list lacks %s %s:\n%s", m.path, version, out)
				}
			}
			if strings.Contains(string(out), "=>") {
				t.Errorf("the importer's build list replaces a module:\n%s", out)
			}
		}
	}
	out, err := exec.Command(filepath.Join(prog, "importer")).CombinedOutput()
	if err != nil {
		t.Fatalf("the importer's program: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "kafka_server_socket_server_metrics_connection_close_total") {
		t.Errorf("the importer's program printed no connection-closed metric:\n%s", out)
	}
}

// libraryVersionRequired returns the library's version in a plugin's go.mod.
func libraryVersionRequired(t *testing.T, gomod string) string {
	t.Helper()
	b, err := os.ReadFile(gomod)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse(gomod, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Require {
		if r.Mod.Path == module {
			return r.Mod.Version
		}
	}
	t.Fatalf("%s does not require %s", gomod, module)
	return ""
}

// serve adds the module path at version, from the files in dir, to the
// module proxy directory proxy (the GOPROXY protocol's file layout).
func serve(t *testing.T, proxy, path, version, dir string) {
	t.Helper()
	escaped, err := modv.EscapePath(path)
	if err != nil {
		t.Fatal(err)
	}
	at := filepath.Join(proxy, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	z, err := os.Create(filepath.Join(at, version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	if err := zip.CreateFromDir(z, modv.Version{Path: path, Version: version}, dir); err != nil {
		t.Fatalf("zipping %s: %v", path, err)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{
		version + ".mod":  gomod,
		version + ".info": info,
		"list":            []byte(version + "\n"),
	} {
		if err := os.WriteFile(filepath.Join(at, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// goEnv returns the go command's value of the environment variable name.
func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}
