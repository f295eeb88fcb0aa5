package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// target is one fuzz function and the package directory holding it.
type target struct {
	Dir  string // relative to the module root, "./listener"
	Name string
}

// result is what running a target came to.
type result struct {
	target
	Elapsed time.Duration
	Execs   string // the fuzzer's last reported count
	Err     error
	Output  string // the tail of go test's output, kept for failures
}

var fuzzFunc = regexp.MustCompile(`(?m)^func (Fuzz\w+)\(\w+ \*testing\.F\)`)

// findTargets lists the fuzz targets under root, ordered by package and
// name, skipping testdata and node_modules folders.
func findTargets(root string) ([]target, error) {
	var out []target
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (n == "testdata" || n == "node_modules" || strings.HasPrefix(n, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		for _, m := range fuzzFunc.FindAllSubmatch(src, -1) {
			out = append(out, target{Dir: "./" + filepath.ToSlash(rel), Name: string(m[1])})
		}
		return nil
	})
	slices.SortFunc(out, func(a, b target) int {
		if c := strings.Compare(a.Dir, b.Dir); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, err
}

var execsLine = regexp.MustCompile(`execs: (\d+)`)

// budget is how long to fuzz each target, in go test's -fuzztime form: a
// duration ("10m") or a count of executions ("1000x").
type budget string

var countBudget = regexp.MustCompile(`^[1-9][0-9]*x$`)

// parseBudget checks s is a -fuzztime go test accepts and that it is not
// zero.
func parseBudget(s string) (budget, error) {
	if countBudget.MatchString(s) {
		return budget(s), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return "", fmt.Errorf("-fuzztime %q: want a positive duration such as 10m or a count such as 1000x", s)
	}
	return budget(d.String()), nil
}

// isCount reports whether b counts executions rather than time.
func (b budget) isCount() bool { return strings.HasSuffix(string(b), "x") }

// deadlineRace is what go test prints when its fuzzing coordinator's own
// -fuzztime deadline escapes as a failure (golang/go#75804, fixed in Go
// 1.27). A target that hangs can end the same way, so it stays a failure;
// the note only tells a reader where to look.
const deadlineRace = "context deadline exceeded"

// bareDeadline reports whether go test's output ends a fuzzing run with
// the deadline error and no failing input written.
func bareDeadline(out string) bool {
	return strings.Contains(out, "\n    "+deadlineRace+"\n") && !strings.Contains(out, "Failing input written")
}

// runTarget fuzzes t for b in the module at root, with parallel workers
// (0: go test's default).
func runTarget(ctx context.Context, root string, t target, b budget, parallel int) result {
	args := []string{"test", "-run", "^$", "-fuzz", "^" + t.Name + "$", "-fuzztime", string(b)}
	if parallel > 0 {
		args = append(args, "-parallel", fmt.Sprint(parallel))
	}
	cmd := exec.CommandContext(ctx, "go", append(args, t.Dir)...)
	cmd.Dir = root
	start := time.Now()
	out, err := cmd.CombinedOutput()
	r := result{target: t, Elapsed: time.Since(start), Err: err}
	if m := execsLine.FindAllSubmatch(out, -1); len(m) > 0 {
		r.Execs = string(m[len(m)-1][1])
	}
	if err != nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		r.Output = strings.Join(lines[max(0, len(lines)-30):], "\n")
	}
	return r
}

// libraryModule is the module path of the library whose fuzz targets the
// command runs; the examples are a module of their own inside it.
const libraryModule = "github.com/kafkanet/kafkanet"

// moduleRoot is the directory of the library's go.mod: the working
// directory or the nearest parent whose go.mod declares libraryModule.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if raw, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && declaresModule(raw, libraryModule) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the " + libraryModule + " module")
		}
		dir = parent
	}
}

// declaresModule reports whether the go.mod text gomod declares module
// path.
func declaresModule(gomod []byte, path string) bool {
	for line := range strings.SplitSeq(string(gomod), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" && strings.Trim(f[1], `"`) == path {
			return true
		}
	}
	return false
}

// options are the command's flags.
type options struct {
	fuzztime string
	run      string
	parallel int
	list     bool
}

// flagSet defines the command's flags, into o, on a FlagSet that reports
// to stderr.
func flagSet(o *options, stderr io.Writer) *flag.FlagSet {
	fl := flag.NewFlagSet("fuzz", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.StringVar(&o.fuzztime, "fuzztime", "10m", "how long to fuzz each target: a `duration`, or a count of executions such as 1000x")
	fl.StringVar(&o.run, "run", "", "fuzz only the targets whose name matches this `regexp`")
	fl.IntVar(&o.parallel, "parallel", 0, "fuzzing workers per target (0: GOMAXPROCS)")
	fl.BoolVar(&o.list, "list", false, "list the targets and exit")
	fl.Usage = func() {
		fmt.Fprintln(fl.Output(), "usage: fuzz [-fuzztime 10m|1000x] [-run regexp] [-parallel n] [-list]")
		fl.PrintDefaults()
	}
	return fl
}

// run is the command: it returns the process's exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	fl := flagSet(&o, stderr)
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "fuzz: unexpected argument %q\n", fl.Arg(0))
		fl.Usage()
		return 2
	}
	b, err := parseBudget(o.fuzztime)
	if err != nil {
		fmt.Fprintf(stderr, "fuzz: %v\n", err)
		return 2
	}
	var match *regexp.Regexp
	if o.run != "" {
		var err error
		if match, err = regexp.Compile(o.run); err != nil {
			fmt.Fprintf(stderr, "fuzz: -run: %v\n", err)
			return 2
		}
	}
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintf(stderr, "fuzz: %v\n", err)
		return 1
	}
	targets, err := findTargets(root)
	if err != nil {
		fmt.Fprintf(stderr, "fuzz: finding targets: %v\n", err)
		return 1
	}
	if match != nil {
		targets = slices.DeleteFunc(targets, func(t target) bool { return !match.MatchString(t.Name) })
	}
	if len(targets) == 0 {
		fmt.Fprintln(stderr, "fuzz: no targets")
		return 1
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	if o.list {
		for _, t := range targets {
			fmt.Fprintf(w, "%s %s\n", t.Dir, t.Name)
		}
		return 0
	}
	fmt.Fprintf(w, "%-30s %-32s %10s %12s  %s\n", "package", "target", "elapsed", "execs", "result")
	failed := 0
	for _, t := range targets {
		r := runTarget(ctx, root, t, b, o.parallel)
		status := "ok"
		if r.Err != nil {
			status = "FAIL: " + r.Err.Error()
			if bareDeadline(r.Output) && !b.isCount() {
				status += " (a bare deadline: a hang, or golang/go#75804; rerun with a count such as -fuzztime 100000x)"
			}
			failed++
		}
		fmt.Fprintf(w, "%-30s %-32s %10s %12s  %s\n", t.Dir, t.Name, r.Elapsed.Round(time.Second), r.Execs, status)
		if r.Err != nil {
			fmt.Fprintf(w, "%s\n", r.Output)
		}
		w.Flush()
		if ctx.Err() != nil {
			break
		}
	}
	if failed > 0 || ctx.Err() != nil {
		fmt.Fprintf(w, "%d of %d targets failed\n", failed, len(targets))
		return 1
	}
	return 0
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
