package connreg_test

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/internal/bindcheck"
	"github.com/kafkanet/kafkanet/internal/connreg"
	"github.com/kafkanet/kafkanet/protocolmap"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(bindcheck.Wrap(m)) }

var t0 = time.Date(2026, 4, 27, 10, 15, 30, 0, time.UTC)

func sp(s string) *string { return &s }

func conn(id, principal, addr, listener string, at time.Time) connregistry.Conn {
	typ, name, _ := strings.Cut(principal, ":")
	return connregistry.Conn{Info: connregistry.Info{
		ID: id, Principal: connregistry.Principal{Type: typ, Name: name},
		ClientAddr: netip.MustParseAddrPort(addr), Listener: protocolmap.ListenerName(listener), SecurityProtocol: protocolmap.SASLSSL,
		ConnectedAt: at,
	}, State: connregistry.StateReady}
}

func TestRegistryLifecycle(t *testing.T) {
	r := connreg.New(2)
	var closedWith []connregistry.CloseReason
	var mu sync.Mutex
	closer := connreg.CloserFunc(func(reason connregistry.CloseReason) { mu.Lock(); closedWith = append(closedWith, reason); mu.Unlock() })
	a := connreg.Add(r, conn("a", "User:alice", "127.0.0.1:1", "CLIENT", t0), closer)
	b := connreg.Add(r, conn("b", "User:bob", "127.0.0.1:2", "CLIENT", t0.Add(time.Second)), closer)
	a.Request(t0.Add(2*time.Second), 100, "kgo")
	a.Response(t0.Add(3*time.Second), 40)
	a.SetClientSoftware([]byte("kgo"), []byte("1.22"))

	got := r.Snapshot(connregistry.Filter{})
	require.Len(t, got, 2)
	assert.Equal(t, "a", got[0].ID, "ordered by connection time")
	assert.Equal(t, int64(100), got[0].BytesIn)
	assert.Equal(t, int64(40), got[0].BytesOut)
	assert.Equal(t, int64(1), got[0].Requests)
	assert.Equal(t, "kgo", got[0].ClientID)
	assert.True(t, t0.Add(3*time.Second).Equal(got[0].LastActivity))
	assert.Equal(t, "kgo", got[0].ClientSoftwareName)

	f := connregistry.Filter{Principal: sp("User:bob")}
	killed := r.Close(f, connregistry.CloseByOperator)
	require.Len(t, killed, 1)
	assert.Equal(t, "b", killed[0].ID)
	assert.Equal(t, []connregistry.CloseReason{connregistry.CloseByOperator}, closedWith)

	b.Remove(t0.Add(5*time.Second), connregistry.CloseByOperator)
	b.Remove(t0.Add(6*time.Second), connregistry.CloseIdle) // only the first counts
	assert.Equal(t, 1, r.Len())
	closed := r.Closed(connregistry.Filter{})
	require.Len(t, closed, 1)
	assert.Equal(t, connregistry.CloseByOperator, closed[0].CloseReason)
	assert.Equal(t, t0.Add(5*time.Second), closed[0].ClosedAt)
	assert.Equal(t, connregistry.StateClosing, closed[0].State)

	// The history is a ring of 2: the oldest goes.
	for i := range 3 {
		e := connreg.Add(r, conn(fmt.Sprint("h", i), "User:x", "127.0.0.1:9", "CLIENT", t0), nil)
		e.Remove(t0.Add(time.Duration(10+i)*time.Second), connregistry.CloseByClient)
	}
	closed = r.Closed(connregistry.Filter{})
	require.Len(t, closed, 2)
	assert.Equal(t, []string{"h1", "h2"}, []string{closed[0].ID, closed[1].ID})
}

// A forgotten connection leaves the open set without a trace in the
// history, and a Remove after it changes nothing; Forget after Remove
// takes nothing out of the history.
func TestRegistryForget(t *testing.T) {
	r := connreg.New(10)
	probe := connreg.Add(r, conn("probe", "User:ANONYMOUS", "127.0.0.1:1", "CLIENT", t0), nil)
	kept := connreg.Add(r, conn("kept", "User:alice", "127.0.0.1:2", "CLIENT", t0), nil)
	require.Equal(t, 2, r.Len())
	probe.Forget()
	probe.Remove(t0.Add(time.Second), connregistry.CloseByClient)
	kept.Remove(t0.Add(time.Second), connregistry.CloseByClient)
	kept.Forget()
	assert.Zero(t, r.Len())
	assert.Empty(t, r.Snapshot(connregistry.Filter{}))
	closed := r.Closed(connregistry.Filter{})
	require.Len(t, closed, 1)
	assert.Equal(t, "kept", closed[0].ID)
}

// The requests of a connection share one copy of its description until it
// changes (a setter) or the connection rests (Idle): each request carries
// the description it found, never a later one.
func TestRequestsShareTheDescriptionTheyFound(t *testing.T) {
	r := connreg.New(0)
	e := connreg.Add(r, conn("a", "User:alice", "127.0.0.1:1", "CLIENT", t0), nil)
	e.Request(t0, 10, "kgo")
	first := e.Shared()
	assert.Equal(t, "User:alice", first.Principal.String())
	e.Request(t0, 10, "kgo")
	again := e.Shared()
	assert.Same(t, first, again, "no change: the same copy")

	e.SetPrincipal(connregistry.Principal{Type: "User", Name: "bob"})
	second := e.Shared()
	assert.NotSame(t, first, second)
	assert.Equal(t, "User:alice", first.Principal.String(), "an earlier request keeps what it found")
	assert.Equal(t, "User:bob", second.Principal.String())
	assert.Equal(t, "User:bob", e.Info().Principal.String())

	e.Idle()
	third := e.Shared()
	assert.NotSame(t, second, third, "a rest lets go of the copy")
	assert.Equal(t, *second, *third)
	fourth := e.Shared()
	assert.Same(t, third, fourth)
}

// A request makes no copy of the description: only Shared does, for a
// request that carries one (socketserver's Request.Conn), so that a
// request the server answers itself allocates nothing here, after a rest
// as before it. Request returns the session's expiry, read with it.
func TestRequestMakesNoCopy(t *testing.T) {
	r := connreg.New(-1)
	c := conn("a", "User:alice", "127.0.0.1:1", "CLIENT", t0)
	c.SessionExpiry = t0.Add(time.Hour)
	e := connreg.Add(r, c, nil)
	defer e.Forget()
	id, expiry := e.Request(t0, 10, "kgo")
	assert.Equal(t, "kgo", id)
	assert.Equal(t, t0.Add(time.Hour), expiry, "the session's expiry")
	if raceEnabled {
		return // the race detector's instrumentation allocates
	}
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		e.Idle()
		e.Request(t0, 10, "kgo")
	}), "a request after a rest")
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() {
		e.Idle()
		e.Shared()
	}), "the shared copy, made after a rest")
}

// The software names and versions connections report are interned: the
// connections of one client share one copy. A pair too long is each
// connection's own, and a full table starts again empty, so that clients
// sending many names keep neither memory nor the table.
func TestClientSoftwareInterned(t *testing.T) {
	r := connreg.New(-1)
	add := func(name, version string) *connreg.Entry {
		e := connreg.Add(r, conn("x", "User:ANONYMOUS", "127.0.0.1:1", "CLIENT", t0), nil)
		t.Cleanup(e.Forget)
		e.SetClientSoftware([]byte(name), []byte(version))
		return e
	}
	same := func(a, b *connreg.Entry) bool {
		ai, bi := a.Info(), b.Info()
		return unsafe.StringData(ai.ClientSoftwareName) == unsafe.StringData(bi.ClientSoftwareName) &&
			unsafe.StringData(ai.ClientSoftwareVersion) == unsafe.StringData(bi.ClientSoftwareVersion)
	}
	a, b := add("apache-kafka-java", "3.9.0"), add("apache-kafka-java", "3.9.0")
	assert.Equal(t, "apache-kafka-java", b.Info().ClientSoftwareName)
	assert.Equal(t, "3.9.0", b.Info().ClientSoftwareVersion)
	assert.True(t, same(a, b), "one copy of the name and version")

	long := strings.Repeat("n", 65)
	assert.False(t, same(add(long, "1"), add(long, "1")), "a name too long: each connection's own")
	assert.Equal(t, long, add(long, "1").Info().ClientSoftwareName)

	// 256 pairs fill the table (apache-kafka-java's is one); the next
	// starts it again, and it interns as before.
	for i := range 255 {
		add("client", strconv.Itoa(i))
	}
	assert.True(t, same(add("client", "0"), add("client", "0")), "within the bound: interned")
	c := add("client", "new") // the 257th pair: a new table
	assert.True(t, same(c, add("client", "new")), "after the table started again: interned")
	d := add("apache-kafka-java", "3.9.0")
	assert.Equal(t, "3.9.0", d.Info().ClientSoftwareVersion)
	assert.False(t, same(a, d), "a pair interned before the table started again is copied anew")
	assert.True(t, same(d, add("apache-kafka-java", "3.9.0")), "and then shared")
}

// The same software as before changes nothing: no allocation, and the
// requests keep sharing the description's copy.
func TestSetClientSoftwareUnchanged(t *testing.T) {
	r := connreg.New(-1)
	e := connreg.Add(r, conn("a", "User:ANONYMOUS", "127.0.0.1:1", "CLIENT", t0), nil)
	defer e.Forget()
	name, version := []byte("kgo"), []byte("1.22")
	e.SetClientSoftware(name, version)
	first := e.Shared()
	e.SetClientSoftware(name, version)
	assert.Same(t, first, e.Shared(), "the same software: the same copy")
	e.SetClientSoftware(name, []byte("1.23"))
	assert.NotSame(t, first, e.Shared(), "another version: a new copy")
	assert.Equal(t, "1.23", e.Shared().ClientSoftwareVersion)
	if raceEnabled {
		return
	}
	assert.Zero(t, testing.AllocsPerRun(100, func() { e.SetClientSoftware(name, []byte("1.23")) }))
}

// Snapshots taken in a loop while thousands of connections open, change
// and close: no race (under -race), no torn record (the fields written
// together are seen together), and the count returns to zero.
func TestRegistryConcurrentSnapshots(t *testing.T) {
	r := connreg.New(100)
	stop := make(chan struct{})
	var snaps sync.WaitGroup
	snaps.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, c := range r.Snapshot(connregistry.Filter{}) {
				// Update writes name and version together.
				if c.ClientSoftwareName != "" && c.ClientSoftwareVersion != c.ClientSoftwareName+"-v" {
					t.Errorf("torn record: %q %q", c.ClientSoftwareName, c.ClientSoftwareVersion)
					return
				}
			}
		}
	})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 500 {
				e := connreg.Add(r, conn(fmt.Sprint(w, "-", i), "User:u", "127.0.0.1:1", "CLIENT", time.Now()), nil)
				name := fmt.Sprint("sw", i)
				e.SetClientSoftware([]byte(name), []byte(name+"-v"))
				e.Request(time.Now(), 10, "c")
				e.Remove(time.Now(), connregistry.CloseByClient)
			}
		})
	}
	wg.Wait()
	close(stop)
	snaps.Wait()
	assert.Zero(t, r.Len())
	assert.Len(t, r.Closed(connregistry.Filter{}), 100)
}

// A throttle shows in the listing while it runs (ThrottledUntil) and adds
// the time it lasted to ThrottleTime when it ends: at its end, earlier
// when it is cut short, and at the close of a connection closed while
// muted.
func TestRegistryThrottle(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name      string
		from      time.Time
		until     time.Time
		end       func(e *connreg.Entry)
		wantTotal time.Duration
	}{
		{"ends at its time", now.Add(-3 * time.Second), now.Add(-time.Second),
			func(e *connreg.Entry) { e.EndThrottle(now) }, 2 * time.Second},
		{"ends early", now.Add(-3 * time.Second), now.Add(time.Hour),
			func(e *connreg.Entry) { e.EndThrottle(now.Add(-2 * time.Second)) }, time.Second},
		{"a new throttle ends the running one", now.Add(-3 * time.Second), now.Add(time.Hour),
			func(e *connreg.Entry) {
				e.Throttle(now.Add(-2*time.Second), now.Add(-time.Second))
				e.EndThrottle(now)
			}, 2 * time.Second},
		{"the connection closes while muted", now.Add(-3 * time.Second), now.Add(time.Hour),
			func(e *connreg.Entry) { e.Remove(now.Add(-time.Second), connregistry.CloseByClient) }, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := connreg.New(1)
			e := connreg.Add(r, conn("a", "User:alice", "127.0.0.1:1", "CLIENT", t0), nil)
			assert.Zero(t, r.Snapshot(connregistry.Filter{})[0].ThrottledUntil)

			e.Throttle(tc.from, tc.until)
			got := r.Snapshot(connregistry.Filter{})[0]
			assert.True(t, tc.until.Equal(got.ThrottledUntil), "listed as throttled until %s: %s", tc.until, got.ThrottledUntil)
			assert.Positive(t, got.ThrottleTime, "the running throttle counts")
			rec := connregistry.Record(got)
			assert.Equal(t, tc.until.UnixMilli(), rec.ThrottledUntil)
			assert.Equal(t, got.ThrottleTime.Milliseconds(), rec.ThrottleTimeMs)

			tc.end(e)
			var after connregistry.Conn
			if open := r.Snapshot(connregistry.Filter{}); len(open) == 1 {
				after = open[0]
			} else {
				after = r.Closed(connregistry.Filter{})[0]
			}
			assert.Zero(t, after.ThrottledUntil, "no longer throttled")
			assert.Equal(t, tc.wantTotal, after.ThrottleTime)
			assert.Zero(t, connregistry.Record(after).ThrottledUntil)
		})
	}
}

// BenchmarkRequestUpdate is the per-request cost the registry adds to the
// data plane.
func BenchmarkRequestUpdate(b *testing.B) {
	r := connreg.New(0)
	e := connreg.Add(r, connregistry.Conn{Info: connregistry.Info{ID: "x", ConnectedAt: time.Now()}}, nil)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		e.Request(now, 100, "kgo")
		e.Response(now, 50)
	}
}

// TestGuardSettersAllocateNothing holds the description's setters to no
// allocation: the software and principal of any connection, and the TLS
// and SASL fields once its optional part exists.
func TestGuardSettersAllocateNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	r := connreg.New(-1)
	e := connreg.Add(r, conn("a", "User:ANONYMOUS", "127.0.0.1:1", "CLIENT", t0), nil)
	defer e.Forget()
	p := connregistry.Principal{Type: "User", Name: "alice"}
	kgo, v122, v123 := []byte("kgo"), []byte("1.22"), []byte("1.23")
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		e.SetClientSoftware(kgo, v122)
		e.SetPrincipal(p)
	}), "a plaintext connection's software and principal")
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		e.SetClientSoftware(kgo, v123)
		e.SetClientSoftware(kgo, v122)
	}), "a change of software the registry has interned")
	e.SetTLS(0x0304, 0x1301, "broker-1")
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		e.SetTLS(0x0304, 0x1301, "broker-1")
		e.SetSASLMechanism("PLAIN")
		e.SetAuthenticated("PLAIN", t0, t0.Add(time.Hour))
	}), "TLS and SASL, once the optional part exists")
}
