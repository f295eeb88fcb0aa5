package bindcheck

import (
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The package's own tests listen where others may not, so they run
// unwatched; the binary is still the watcher that Wrap starts.
func TestMain(m *testing.M) {
	if os.Getenv(watchEnv) != "" {
		os.Exit(watchParent(os.Stdin, os.Stdout))
	}
	os.Exit(m.Run())
}

func TestAllowed(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:40000", true},
		{"127.0.0.2:32768", true},
		{"[::1]:60999", true},
		{"[::ffff:127.0.0.1]:40000", true},
		{"127.0.0.1:9092", false},
		{"127.0.0.1:32767", false},
		{"127.0.0.1:61000", false},
		{"0.0.0.0:40000", false},
		{"[::]:40000", false},
		{"192.168.1.10:40000", false},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			assert.Equal(t, tc.want, Allowed(netip.MustParseAddrPort(tc.addr), 32768, 60999))
		})
	}
}

// listenFor listens on addr until the watcher has read the sockets twice,
// or, for an address it must report, long enough for a watcher on a loaded
// machine to be scheduled and see it (see TestChildListens).
func listenFor(t *testing.T, addr string, reported bool) {
	t.Helper()
	if reported {
		listenLong(t, addr, 1000*Interval)
		return
	}
	listenLong(t, addr, 100*Interval)
}

// freeFixedPort finds a port outside the ephemeral range that loopback
// can bind now.
func freeFixedPort(t *testing.T, lo uint16) int {
	t.Helper()
	for p := 20000; p < int(lo) && p < 20500; p++ {
		if ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p)); err == nil {
			ln.Close()
			return p
		}
	}
	t.Skip("no free port below the ephemeral range")
	return 0
}

func TestWatch(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the sockets are read on Linux only")
	}
	lo, _, err := ephemeralPorts()
	require.NoError(t, err)
	fixed := freeFixedPort(t, lo)
	for _, tc := range []struct {
		name string
		addr string
		bad  bool
	}{
		{"loopback port 0", "127.0.0.1:0", false},
		{"IPv6 loopback port 0", "[::1]:0", false},
		{"wildcard port 0", ":0", true},
		{"IPv4 wildcard port 0", "0.0.0.0:0", true},
		{"loopback fixed port", "127.0.0.1:" + strconv.Itoa(fixed), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := Watch()
			require.NoError(t, err)
			if ln, err := net.Listen("tcp", tc.addr); err != nil {
				w.Stop()
				t.Skipf("cannot listen on %s here: %v", tc.addr, err)
			} else {
				if tc.bad { // until the watcher has seen it, however loaded the machine
					require.Eventually(t, func() bool {
						w.mu.Lock()
						defer w.mu.Unlock()
						return len(w.bad) > 0
					}, 10*time.Second, Interval, "the watcher never saw %s", tc.addr)
				} else {
					time.Sleep(100 * Interval) // the watcher reads the sockets twice or more
				}
				ln.Close()
			}
			bad := w.Stop()
			if tc.bad {
				require.Len(t, bad, 1)
				assert.Contains(t, bad[0], "(the test process)")
			} else {
				assert.Empty(t, bad)
			}
		})
	}
}

// A socket listening before the watch began (a local Kafka, another
// program) is not the tests', and does not fail them.
func TestWatchIgnoresWhatWasListening(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the sockets are read on Linux only")
	}
	ln, err := net.Listen("tcp", ":0")
	require.NoError(t, err)
	defer ln.Close()
	w, err := Watch()
	require.NoError(t, err)
	time.Sleep(100 * Interval)
	assert.Empty(t, w.Stop())
}

// A child process's listeners count too: the example programs run as
// children of their tests.
func TestWatchChildProcess(t *testing.T) {
	if os.Getenv("BINDCHECK_CHILD_LISTEN") != "" {
		t.Skip("the child's own run")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the sockets are read on Linux only")
	}
	w, err := Watch()
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildListens$")
	cmd.Env = append(os.Environ(), "BINDCHECK_CHILD_LISTEN=:0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	bad := w.Stop()
	require.Len(t, bad, 1, "%s", out)
	assert.Contains(t, bad[0], "child process")
}

func TestChildListens(t *testing.T) {
	addr := os.Getenv("BINDCHECK_CHILD_LISTEN")
	if addr == "" {
		t.Skip("run by TestWatchChildProcess")
	}
	// Long enough for a watcher on a loaded machine (the race detector, a
	// busy CI runner) to be scheduled and see it: at 200 ms it went unseen
	// once under a load average of 20.
	listenLong(t, addr, 1000*Interval)
}

// listenLong listens on addr for d.
func listenLong(t *testing.T, addr string, d time.Duration) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	time.Sleep(d)
	require.NoError(t, ln.Close())
}

// Wrap fails a run that passed when it listened where it may not, and
// says where.
func TestWrap(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the sockets are read on Linux only")
	}
	for _, tc := range []struct {
		addr string
		want int
	}{
		{"127.0.0.1:0", 0},
		{"0.0.0.0:0", 1},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			stderr := os.Stderr
			r, wr, err := os.Pipe()
			require.NoError(t, err)
			os.Stderr = wr
			code := Wrap(runFunc(func() int { listenFor(t, tc.addr, tc.want != 0); return 0 })).Run()
			os.Stderr = stderr
			wr.Close()
			msg, _ := readAll(r)
			assert.Equal(t, tc.want, code)
			if tc.want != 0 {
				assert.Contains(t, msg, "]:", "the wildcard address, which Go listens on as [::]")
				assert.Contains(t, msg, "(the test process)")
				assert.True(t, strings.HasPrefix(msg, "bindcheck: "), msg)
			}
		})
	}
}

type runFunc func() int

func (f runFunc) Run() int { return f() }

func readAll(f *os.File) (string, error) {
	defer f.Close()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := f.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			return sb.String(), nil
		}
	}
}

// Every test binary of the repository runs under the check: a package
// whose tests do not wrap their run in Wrap could bind anything unseen.
func TestEveryTestBinaryIsChecked(t *testing.T) {
	root := filepath.Join("..", "..")
	withTests := map[string]bool{}
	checked := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		dir := filepath.Dir(path)
		withTests[dir] = true
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), "bindcheck.Wrap(m)") {
			checked[dir] = true
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, len(withTests), 10, "the repository's test packages were not found from %s", root)
	for dir := range withTests {
		if filepath.Base(dir) == "bindcheck" {
			continue
		}
		assert.True(t, checked[dir], "%s: its TestMain must run the tests under bindcheck.Wrap", dir)
	}
}
