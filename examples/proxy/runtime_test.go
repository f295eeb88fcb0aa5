package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/examples/internal/exampleproc"
)

// The runtime's settings from the flags and the environment: one P and
// sysmon kept awake unless the environment or a flag says otherwise.
func TestRuntimeSettings(t *testing.T) {
	awake := "GODEBUG=" + sysmonSetting
	for _, tc := range []struct {
		name    string
		args    []string
		environ []string
		want    runtimeSettings
	}{
		{"nothing set", nil, []string{"PATH=/bin"},
			runtimeSettings{procs: 1, reexec: []string{"PATH=/bin", awake}}},
		{"the environment's GOMAXPROCS", nil, []string{"GOMAXPROCS=4"},
			runtimeSettings{procs: 1, leave: true, reexec: []string{"GOMAXPROCS=4", awake}}},
		{"an empty GOMAXPROCS is none", nil, []string{"GOMAXPROCS="},
			runtimeSettings{procs: 1, reexec: []string{"GOMAXPROCS=", awake}}},
		{"-gomaxprocs over the environment", []string{"-gomaxprocs", "3"}, []string{"GOMAXPROCS=4"},
			runtimeSettings{procs: 3, reexec: []string{"GOMAXPROCS=4", awake}}},
		{"-gomaxprocs 0: Go's default", []string{"-gomaxprocs", "0"}, nil,
			runtimeSettings{procs: 0, reexec: []string{awake}}},
		{"another GODEBUG setting kept", []string{"-upstream", "127.0.0.1:9092"}, []string{"GODEBUG=gctrace=1", "HOME=/h"},
			runtimeSettings{procs: 1, reexec: []string{"HOME=/h", "GODEBUG=gctrace=1," + sysmonSetting}}},
		{"the user's schedtrace stands", nil, []string{"GODEBUG=gctrace=1,schedtrace=0"},
			runtimeSettings{procs: 1}},
		{"executed again", nil, []string{awake},
			runtimeSettings{procs: 1}},
		{"-sysmon-awake=false", []string{"-sysmon-awake=false"}, []string{"PATH=/bin"},
			runtimeSettings{procs: 1}},
		{"bad flags: run says so", []string{"-gomaxprocs", "x"}, []string{"PATH=/bin"},
			runtimeSettings{leave: true}},
		{"a negative -gomaxprocs: run says so", []string{"-gomaxprocs", "-5"}, []string{"PATH=/bin"},
			runtimeSettings{leave: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, settingsFor(tc.args, tc.environ))
		})
	}
}

// sysmonAwake reads GODEBUG as the runtime does: the last schedtrace that
// parses counts, and only one above 0 keeps sysmon awake.
func TestSysmonAwake(t *testing.T) {
	for godebug, want := range map[string]bool{
		"":                             false,
		sysmonSetting:                  true,
		"gctrace=1," + sysmonSetting:   true,
		"schedtrace=0":                 false,
		"schedtrace=-5":                false,
		"schedtrace=x":                 false,
		"schedtrace=1000,schedtrace=0": false,
		"schedtrace=0,schedtrace=1000": true,
		"schedtrace=1000,schedtrace=x": true,
		"schedtraces=1000":             false,
	} {
		assert.Equal(t, want, sysmonAwake(godebug), "GODEBUG=%q", godebug)
	}
}

// The proxy as shipped, run with nothing of the Go runtime's in its
// environment, runs one P with sysmon awake: it executed itself again, in
// the same process, with schedtrace added to GODEBUG. The environment and
// the flags change either.
func TestRuntimeDefaultsAsShipped(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the proxy executes itself again on Linux only")
	}
	bin := exampleproc.Build(t, "proxy")
	fake := startFakeUpstream(t)
	base := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return k == "GOMAXPROCS" || k == "GODEBUG"
	})
	for _, tc := range []struct {
		name        string
		args, env   []string
		procs       string
		awake       bool
		wantGODEBUG string // in the process's environment; "" for none
	}{
		{"as shipped", nil, nil, "1", true, sysmonSetting},
		{"GOMAXPROCS and GODEBUG set", nil, []string{"GOMAXPROCS=2", "GODEBUG=gctrace=0"}, "2", true, "gctrace=0," + sysmonSetting},
		{"the flags", []string{"-gomaxprocs", "3", "-sysmon-awake=false"}, []string{"GOMAXPROCS=2"}, "3", false, ""},
		{"the user's schedtrace", nil, []string{"GODEBUG=schedtrace=0"}, "1", false, "schedtrace=0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			args := append([]string{"-upstream", fake.addr(), "-set", "listeners=PLAINTEXT://127.0.0.1:0"}, tc.args...)
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Env = append(slices.Clone(base), tc.env...)
			stderr, err := cmd.StderrPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			defer func() {
				_ = cmd.Process.Signal(os.Interrupt)
				_ = cmd.Wait()
			}()
			logged := make(chan string, 1)
			go func() {
				sc := bufio.NewScanner(stderr)
				var all strings.Builder
				for sc.Scan() {
					all.WriteString(sc.Text() + "\n")
					if strings.Contains(sc.Text(), "msg=listening") {
						logged <- all.String()
						break
					}
				}
				close(logged)
				for sc.Scan() { // keep the pipe drained until the process ends
				}
			}()
			out, ok := <-logged
			require.True(t, ok, "the proxy did not start")
			m := regexp.MustCompile(`msg="Go runtime" gomaxprocs=(\d+) sysmon_awake=(\w+)`).FindStringSubmatch(out)
			require.NotNil(t, m, "no runtime line in:\n%s", out)
			assert.Equal(t, tc.procs, m[1], out)
			assert.Equal(t, fmt.Sprint(tc.awake), m[2], out)
			assert.Equal(t, 1, strings.Count(out, `msg="Go runtime"`), "the proxy started more than once:\n%s", out)

			// The process started is the one serving, with the environment
			// it executed itself with.
			environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", cmd.Process.Pid))
			require.NoError(t, err)
			var godebug string
			for kv := range strings.SplitSeq(string(environ), "\x00") {
				if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
					godebug = v
				}
			}
			assert.Equal(t, tc.wantGODEBUG, godebug)
		})
	}
}
