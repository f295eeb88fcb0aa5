package main

// This file is scenario i's attacker child: the bench binary re-executed
// with childFlag and then attackFlag runs the attackers of one case against
// the broker in a process of its own, so that the legitimate client is
// alone in the bench process. Attackers that keep a Go runtime's Ps busy
// (dialing in a loop, writing without pause) make it poll the network
// only when sysmon does, every 10 ms; in the bench process that would
// delay the legitimate client's own answers, and its latency would measure
// the bench's scheduler as much as the broker's fairness.

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// attackFlag, after childFlag, makes the binary scenario i's attacker
// child.
const attackFlag = "-attack"

// attackStatsAsk is the line the bench writes on the attacker child's
// stdin to have its counts.
const attackStatsAsk = "stats"

// errAttackLifetime ends an attacker child that outlived its -lifetime.
var errAttackLifetime = errors.New("the attacker child's lifetime is over")

// attackSpec says which attackers a child runs and against what. It
// travels as the child's flags.
type attackSpec struct {
	Case  hostileKind // 1 to 4: slowloris, claims, failed logins, pipeliners
	Addr  string      // the broker's SASL_PLAINTEXT listener
	Conns int         // how many attackers
	// User and Password log in the attackers that authenticate (cases 2
	// and 4); the failed logins (case 3) try User with WrongPassword.
	User, Password, WrongPassword string
	// Setup bounds the attackers' set-up; Lifetime the child's whole life,
	// after which it tears everything down and exits by itself.
	Setup, Lifetime time.Duration
}

// args returns the attacker child's command-line arguments.
func (s attackSpec) args() []string {
	return []string{childFlag, attackFlag, "-case", strconv.Itoa(int(s.Case)), "-addr", s.Addr, "-conns", strconv.Itoa(s.Conns),
		"-user", s.User, "-password", s.Password, "-wrong-password", s.WrongPassword,
		"-setup", s.Setup.String(), "-lifetime", s.Lifetime.String()}
}

// parseAttackSpec reads an attacker child's arguments (those after
// attackFlag).
func parseAttackSpec(args []string) (attackSpec, error) {
	fs := flag.NewFlagSet("bench-attack", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var s attackSpec
	c := fs.Int("case", 0, "scenario i's case, 1 to 4")
	fs.StringVar(&s.Addr, "addr", "", "the broker's address")
	fs.IntVar(&s.Conns, "conns", 0, "attackers")
	fs.StringVar(&s.User, "user", "", "the attackers' SASL/PLAIN user")
	fs.StringVar(&s.Password, "password", "", "its password")
	fs.StringVar(&s.WrongPassword, "wrong-password", "", "the failed logins' password")
	fs.DurationVar(&s.Setup, "setup", 0, "bound on the attackers' set-up")
	fs.DurationVar(&s.Lifetime, "lifetime", 0, "the child exits by itself after this")
	if err := fs.Parse(args); err != nil {
		return attackSpec{}, err
	}
	s.Case = hostileKind(*c)
	switch {
	case fs.NArg() > 0:
		return attackSpec{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case s.Case < hostileSlowloris || s.Case > hostilePipeliners:
		return attackSpec{}, fmt.Errorf("-case %d: want 1 to 4", s.Case)
	case s.Addr == "":
		return attackSpec{}, errors.New("-addr is required")
	case s.Conns < 1:
		return attackSpec{}, errors.New("-conns must be positive")
	case s.Case != hostileSlowloris && (s.User == "" || s.Password == "" || s.WrongPassword == ""):
		return attackSpec{}, errors.New("-user, -password and -wrong-password are required")
	case s.Setup <= 0 || s.Lifetime <= 0:
		return attackSpec{}, errors.New("-setup and -lifetime must be positive")
	}
	return s, nil
}

// attackReport is what the attacker child tells the bench, a JSON line on
// its stdout: once when its attackers are set up (or could not be), and
// then in answer to each attackStatsAsk line on its stdin.
type attackReport struct {
	Ready bool   `json:"ready"`         // the attackers are set up and running
	Err   string `json:"err,omitempty"` // why they could not be set up
	// Ops counts, since the set-up, the failed logins completed (case 3)
	// or the pipelined requests written (case 4).
	Ops int64 `json:"ops"`
	// Accepted counts the logins with a wrong password that the broker
	// accepted, which fails the case.
	Accepted int64 `json:"accepted"`
	// Open counts the lasting connections (cases 1, 2 and 4) that the
	// broker has neither closed nor reset.
	Open int `json:"open"`
}

// attackMain runs an attacker child: it sets up the attackers of the case
// that args say, reports on stdout, answers attackStatsAsk lines on stdin,
// and tears everything down and returns its exit status when stdin ends
// (the bench closed it, or died), on SIGTERM or SIGINT, or when its
// lifetime is over. It also gets SIGKILL if the bench dies (Pdeathsig).
func attackMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	spec, err := parseAttackSpec(args)
	if err != nil {
		fmt.Fprintf(stderr, "bench attacker child: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeoutCause(ctx, spec.Lifetime, errAttackLifetime)
	defer cancel()

	// stdin's lines, until it ends.
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()

	setupCtx, cancelSetup := context.WithTimeout(ctx, spec.Setup)
	a, setupErr := startAttack(ctx, setupCtx, spec, newDialer(nil))
	cancelSetup()
	defer a.stop()
	status := 0
	report := attackReport{Ready: setupErr == nil}
	if setupErr != nil {
		// The attackers go, and the child waits for the bench to close
		// its stdin, so that the bench reads the error line before the
		// child's exit closes its pipe.
		a.stop()
		report.Err = setupErr.Error()
		fmt.Fprintf(stderr, "bench attacker child: %v\n", setupErr)
		status = 1
	}
	enc := json.NewEncoder(stdout)
	if err := enc.Encode(report); err != nil {
		fmt.Fprintf(stderr, "bench attacker child: %v\n", err)
		return 1
	}
	for {
		select {
		case <-ctx.Done():
			if cause := context.Cause(ctx); errors.Is(cause, errAttackLifetime) {
				fmt.Fprintf(stderr, "bench attacker child: %v (%s)\n", cause, spec.Lifetime)
				return 1
			}
			return status
		case line, ok := <-lines:
			if !ok {
				return status
			}
			if line != attackStatsAsk {
				fmt.Fprintf(stderr, "bench attacker child: unknown command %q\n", line)
				continue
			}
			report.Ops, report.Accepted, report.Open = a.ops.Load(), a.accepted.Load(), a.openConns()
			if err := enc.Encode(report); err != nil {
				fmt.Fprintf(stderr, "bench attacker child: %v\n", err)
				return 1
			}
		}
	}
}

// attack is the attackers of one case, in the attacker child.
type attack struct {
	spec     attackSpec
	d        *dialer // from 127.0.0.2 and up, as the bench's
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	conns    connSet      // the connections that stay: slowloris, claims, pipeliners
	ops      atomic.Int64 // failed logins completed, or pipelined requests written
	accepted atomic.Int64 // logins with a wrong password that the broker accepted
	stopOnce sync.Once
}

// stop ends the attackers: it cancels their context, closes their
// connections and waits for their goroutines.
func (a *attack) stop() {
	a.stopOnce.Do(func() {
		a.cancel()
		a.conns.closeAll()
		a.wg.Wait()
	})
}

// openConns counts the attackers' lasting connections that the broker has
// not closed.
func (a *attack) openConns() int {
	a.conns.mu.Lock()
	conns := slices.Clone(a.conns.conns)
	a.conns.mu.Unlock()
	n := 0
	for _, c := range conns {
		if connOpen(c) {
			n++
		}
	}
	return n
}

// connOpen says whether the peer has neither closed nor reset c, by
// peeking at its receive queue without waiting.
func connOpen(c net.Conn) bool {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return true
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	var buf [1]byte
	err = raw.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = n > 0 || errors.Is(err, syscall.EAGAIN)
		return true
	})
	return open && err == nil
}

// startAttack sets up the attackers of s with d within setupCtx; they run
// until stop or ctx ends. The attack must be stopped even when startAttack
// fails.
func startAttack(ctx, setupCtx context.Context, s attackSpec, d *dialer) (*attack, error) {
	actx, cancel := context.WithCancel(ctx)
	a := &attack{spec: s, d: d, cancel: cancel}
	switch s.Case {
	case hostileSlowloris:
		return a, a.slowloris(actx, setupCtx)
	case hostileClaims:
		return a, a.claims(setupCtx)
	case hostileLogins:
		return a, a.failedLogins(actx, setupCtx)
	case hostilePipeliners:
		return a, a.pipeliners(actx, setupCtx)
	}
	return a, fmt.Errorf("no attackers in case %d", s.Case)
}

// openAll opens n connections with open, hostileParallel at a time, and
// adds them to a's connections; it stops at the first failure.
func openAll(ctx context.Context, a *attack, n int, open func(context.Context) (net.Conn, error)) error {
	var next atomic.Int64
	errs := make([]error, hostileParallel)
	var wg sync.WaitGroup
	for w := range min(n, hostileParallel) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				c, err := open(ctx)
				if err != nil {
					errs[w] = fmt.Errorf("connection %d of %d: %w", i, n, err)
					next.Store(int64(n))
					return
				}
				a.conns.add(c)
			}
		})
	}
	wg.Wait()
	return errors.Join(append(errs, ctx.Err())...)
}

// login opens a connection authenticated as the attackers' user.
func (a *attack) login(ctx context.Context) (net.Conn, error) {
	rc, err := saslLogin(ctx, a.d, a.spec.Addr, a.spec.User, a.spec.Password, hostileLoginTimeout)
	if err != nil {
		return nil, err
	}
	return rc.c, nil
}

// slowlorisFrame is the request a slowloris connection trickles: an
// ApiVersions v0, which a SASL listener takes before authentication, with
// a client id of slowlorisClientIDLen bytes.
func slowlorisFrame() []byte {
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("slowloris" + strings.Repeat("-", slowlorisClientIDLen-len("slowloris"))))
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	return f.AppendRequest(nil, req, 0)
}

// slowloris opens the spec's connections, unauthenticated, and has each
// send its request's next byte every trickleInterval, all but the last.
func (a *attack) slowloris(ctx, setupCtx context.Context) error {
	if err := openAll(setupCtx, a, a.spec.Conns, func(ctx context.Context) (net.Conn, error) {
		return a.d.dial(ctx, a.spec.Addr)
	}); err != nil {
		return err
	}
	conns := slices.Clone(a.conns.conns)
	frame := slowlorisFrame()
	a.wg.Go(func() {
		sent := make([]int, len(conns)) // -1: the broker closed it
		t := time.NewTicker(trickleInterval)
		defer t.Stop()
		for {
			for i, c := range conns {
				if sent[i] < 0 || sent[i] >= len(frame)-1 {
					continue
				}
				_ = c.SetWriteDeadline(time.Now().Add(trickleInterval))
				if _, err := c.Write(frame[sent[i] : sent[i]+1]); err != nil {
					sent[i] = -1
					continue
				}
				sent[i]++
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return nil
}

// claimHeader is what a claim writes: the size of a claimFrameSize-byte
// Produce frame and its first claimSent bytes (API key, version,
// correlation id, client id length).
func claimHeader() []byte {
	h := binary.BigEndian.AppendUint32(nil, claimFrameSize)
	h = binary.BigEndian.AppendUint16(h, uint16(kmsg.Produce))
	h = binary.BigEndian.AppendUint16(h, produceFrameVersion)
	h = binary.BigEndian.AppendUint32(h, 1)
	return binary.BigEndian.AppendUint16(h, uint16(len(clientID)))
}

// claims opens the spec's connections, authenticated, then has each
// announce its Produce frame and send claimSent bytes of it. They hold
// until the attack stops.
func (a *attack) claims(setupCtx context.Context) error {
	if err := openAll(setupCtx, a, a.spec.Conns, a.login); err != nil {
		return err
	}
	h := claimHeader()
	for _, c := range slices.Clone(a.conns.conns) {
		_ = c.SetWriteDeadline(time.Now().Add(hostileLoginTimeout))
		if _, err := c.Write(h); err != nil {
			return fmt.Errorf("a claim: %w", err)
		}
	}
	return nil
}

// failedLogins starts the spec's attackers, which fail logins in a loop
// until ctx ends, and waits until each has failed one.
func (a *attack) failedLogins(ctx, setupCtx context.Context) error {
	n := a.spec.Conns
	first := make(chan struct{}, n)
	for range n {
		a.wg.Go(func() {
			signalled := false
			for ctx.Err() == nil {
				err := failLogin(ctx, a.d, a.spec.Addr, a.spec.User, a.spec.WrongPassword)
				switch {
				case err == nil:
					a.ops.Add(1)
					if !signalled {
						first <- struct{}{}
						signalled = true
					}
				case errors.Is(err, errLoginAccepted):
					a.accepted.Add(1)
				default:
					_ = sleep(ctx, loginRetryPause)
				}
			}
		})
	}
	for got := range n {
		select {
		case <-first:
		case <-setupCtx.Done():
			return fmt.Errorf("%d of %d attackers failed a first login in time: %w", got, n, setupCtx.Err())
		}
	}
	return nil
}

// errLoginAccepted is a login with a wrong password that succeeded.
var errLoginAccepted = errors.New("the broker accepted a wrong password")

// failLogin dials addr, logs in as user with a wrong password, reads the
// SASL_AUTHENTICATION_FAILED answer and waits for the broker to close the
// connection, all within hostileLoginTimeout.
func failLogin(ctx context.Context, d *dialer, addr, user, wrongPassword string) error {
	ctx, cancel := context.WithTimeout(ctx, hostileLoginTimeout)
	defer cancel()
	nc, err := d.dial(ctx, addr)
	if err != nil {
		return err
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	_ = nc.SetDeadline(time.Now().Add(hostileLoginTimeout))
	rc := newRawConn(nc, nil)
	code, err := saslExchange(rc, user, wrongPassword)
	switch {
	case err != nil:
		return err
	case code == 0:
		return errLoginAccepted
	case code != kerr.SaslAuthenticationFailed.Code:
		return fmt.Errorf("a wrong password answered with %w", kerr.ErrorForCode(code))
	}
	_, err = io.Copy(io.Discard, rc.br) // until the broker closes it
	return err
}

// pipelineBatch is pipelineDepth Metadata v1 requests back to back, with
// correlation ids 1 and up.
func pipelineBatch() []byte {
	one := metadataV1Frame()
	var batch []byte
	for i := range pipelineDepth {
		binary.BigEndian.PutUint32(one[8:], uint32(i+1))
		batch = append(batch, one...)
	}
	return batch
}

// pipeliners opens the spec's connections, authenticated, and has each
// write pipelineBatch over and over, never reading, until ctx ends (stop
// closes the connections, which ends a blocked write).
func (a *attack) pipeliners(ctx, setupCtx context.Context) error {
	if err := openAll(setupCtx, a, a.spec.Conns, a.login); err != nil {
		return err
	}
	batch := pipelineBatch()
	for _, c := range slices.Clone(a.conns.conns) {
		_ = c.SetDeadline(time.Time{})
		a.wg.Go(func() {
			for ctx.Err() == nil {
				if _, err := c.Write(batch); err != nil {
					return
				}
				a.ops.Add(pipelineDepth)
			}
		})
	}
	return nil
}
