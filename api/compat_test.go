package api

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// promised names the release whose API the modules keep: the directory
// api/v1.0.0 holds the export data apidiff wrote of each released module at
// that release (one .apidata file each, named by promisedModules) and,
// from the commit after the release, the release's commit (commit: a
// commit cannot hold its own hash). None of them is ever rewritten by
// KAFKANET_API_UPDATE: a change the baseline accepts on purpose must still
// be compatible with the release.
const promised = "v1.0.0"

// isReleased is set in the release's commit: from then on api/v1.0.0 must
// exist, so that removing it fails the check instead of skipping it.
const isReleased = true

// promisedModules lists the released modules: the export data file of each
// under api/v1.0.0, its module path and its directory.
var promisedModules = []struct{ data, path, dir string }{
	{"kafkanet.apidata", module, ".."},
	{"knprom.apidata", module + "/plugin/knprom", "../plugin/knprom"},
	{"knotel.apidata", module + "/plugin/knotel", "../plugin/knotel"},
}

var (
	apidiffOnce sync.Once
	apidiffPath string
	apidiffErr  error
)

// apidiff builds the apidiff this module pins (its go.mod's tool line) and
// returns the binary's path.
func apidiff(t *testing.T) string {
	t.Helper()
	apidiffOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kafkanet-apidiff")
		if err != nil {
			apidiffErr = err
			return
		}
		apidiffPath = filepath.Join(dir, "apidiff")
		cmd := exec.Command("go", "build", "-o", apidiffPath, "golang.org/x/exp/cmd/apidiff")
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
		if out, err := cmd.CombinedOutput(); err != nil {
			apidiffErr = &buildError{err: err, out: out}
		}
	})
	if apidiffErr != nil {
		t.Fatalf("building apidiff: %v", apidiffErr)
	}
	return apidiffPath
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + string(e.out) }

// incompatible returns the incompatible changes apidiff finds between the
// module API in the export data file old and the module modulePath as it is
// in dir, built without the workspace as an importer builds it; "" when
// there are none.
func incompatible(t *testing.T, old, dir, modulePath string) string {
	t.Helper()
	old, err := filepath.Abs(old)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(apidiff(t), "-m", "-incompatible", old, modulePath)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("apidiff %s %s: %v\n%s", old, modulePath, err, stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

// writeModuleAPI writes the export data of modulePath, as it is in dir, to
// file: what a release records.
func writeModuleAPI(t *testing.T, file, dir, modulePath string) {
	t.Helper()
	file, err := filepath.Abs(file)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(apidiff(t), "-m", "-w", file, modulePath)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("apidiff -w %s: %v\n%s", modulePath, err, out)
	}
}

// TestCompatibleWithPromise fails when the exported API of the library or
// of a plugin has changed incompatibly since the promised release: a
// removed or changed identifier, a method added to an interface a user may
// implement, a field whose type changed. Additions pass. It reads the
// release's API from api/v1.0.0, so it needs neither that commit's history
// nor the network. To record a release's API (CONTRIBUTING.md, "Releasing"):
//
//	KAFKANET_API_RELEASE=v1.0.0 go test -run TestCompatibleWithPromise ./api
func TestCompatibleWithPromise(t *testing.T) {
	if v := os.Getenv("KAFKANET_API_RELEASE"); v != "" {
		if v != promised {
			t.Fatalf("KAFKANET_API_RELEASE=%s: this test keeps the promise of %s; change the constant promised first", v, promised)
		}
		if err := os.MkdirAll(promised, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, m := range promisedModules {
			writeModuleAPI(t, filepath.Join(promised, m.data), m.dir, m.path)
		}
		t.Logf("wrote the API of %d modules to %s; commit it, then record that commit in %s",
			len(promisedModules), promised, filepath.Join(promised, "commit"))
		return
	}
	if _, err := os.Stat(promised); errors.Is(err, fs.ErrNotExist) {
		if isReleased {
			t.Fatalf("%s is released, and api/%s, the API it promised, is gone: restore it", promised, promised)
		}
		// Before the release there is no promise to keep: the baseline
		// (TestAPIBaseline) is the only check until api/v1.0.0 exists.
		t.Skipf("%s is not released yet: no api/%s to check against", promised, promised)
	}
	c := "(the release's own commit)"
	switch commit, err := os.ReadFile(filepath.Join(promised, "commit")); {
	case errors.Is(err, fs.ErrNotExist):
		// The release's commit itself: the next commit records its hash.
		t.Logf("%s/commit is not recorded yet: record the release's commit in the commit after it", promised)
	case err != nil:
		t.Fatal(err)
	default:
		c = strings.TrimSpace(string(commit))
		if len(c) != 40 || strings.Trim(c, "0123456789abcdef") != "" {
			t.Fatalf("%s/commit holds %q, not a commit hash", promised, c)
		}
	}
	for _, m := range promisedModules {
		t.Run(m.path, func(t *testing.T) {
			data := filepath.Join(promised, m.data)
			if _, err := os.Stat(data); err != nil {
				t.Fatalf("%v: the API of %s at %s must be committed", err, m.path, promised)
			}
			if changes := incompatible(t, data, m.dir, m.path); changes != "" {
				t.Errorf("the exported API of %s is incompatible with %s (commit %s):\n%s\n"+
					"The promise (CONTRIBUTING.md) allows additions only: restore what was removed or changed.",
					m.path, promised, c, changes)
			}
		})
	}
}

// TestCompatibilityCheckCatchesChanges runs the check above on small fixture
// modules: the API of testdata/compat/v1 is recorded, then each later
// version is checked against it. An addition passes; removing a function,
// changing a signature or adding a method to an interface fails.
func TestCompatibilityCheckCatchesChanges(t *testing.T) {
	const fixture = "example.com/compat"
	data := filepath.Join(t.TempDir(), "v1.apidata")
	writeModuleAPI(t, data, filepath.Join("testdata", "compat", "v1"), fixture)
	for _, tc := range []struct {
		version string
		want    []string // each in the report; none: compatible
	}{
		{"v1", nil},
		{"added", nil},
		{"removed", []string{"Close: removed"}},
		{"changed", []string{"Open: changed from func(string) (*Conn, error) to func(string, int) (*Conn, error)"}},
		{"interface", []string{"Hook.OnClose: added"}},
	} {
		t.Run(tc.version, func(t *testing.T) {
			got := incompatible(t, data, filepath.Join("testdata", "compat", tc.version), fixture)
			if len(tc.want) == 0 {
				if got != "" {
					t.Fatalf("a compatible change is reported incompatible:\n%s", got)
				}
				return
			}
			if got == "" {
				t.Fatal("an incompatible change passes the check")
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("report lacks %q:\n%s", w, got)
				}
			}
		})
	}
}
