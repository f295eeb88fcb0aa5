package socketserver_test

import (
	"context"
	"crypto/tls"
	"math/rand/v2"
	"net"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// parkWithin bounds how long an idle connection takes to park: the
// server's parkAfter (100 ms) plus a processor tick, with room for a
// loaded machine.
const parkWithin = 5 * time.Second

// waitParked waits until the server reports n parked connections.
func waitParked(t testing.TB, srv *socketserver.Server, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return srv.Stats().ParkedConnections == n },
		parkWithin, 10*time.Millisecond, "want %d parked connections, have %d", n, srv.Stats().ParkedConnections)
}

// versionsRoundTrip sends ApiVersions v3 and checks the server's answer.
func versionsRoundTrip(t testing.TB, c net.Conn, corr int32) {
	t.Helper()
	resp := apiVersionsRoundTrip(t, c, apiVersionsReq(3, "park", "1.0"), corr)
	require.Zero(t, resp.ErrorCode)
	require.NotEmpty(t, resp.ApiKeys)
}

// openParked opens n connections, sends each one request with first, and
// waits until all have parked.
func openParked(t testing.TB, srv *socketserver.Server, n int, first func(testing.TB, net.Conn, int32)) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, n)
	for i := range conns {
		conns[i] = socketservertest.Dial(t, srv, "PLAINTEXT")
		first(t, conns[i], 1)
	}
	waitParked(t, srv, n)
	return conns
}

// Idle connections park, whether their last request was answered
// by the server (ApiVersions) or by the host (Metadata, which starts the
// peer watcher); a parked connection serves its next requests as before,
// then parks again; closing them leaves nothing parked and no goroutine
// behind.
func TestIdleConnectionsPark(t *testing.T) {
	for _, tc := range []struct {
		name string
		last func(testing.TB, net.Conn, int32)
	}{
		{"after ApiVersions", versionsRoundTrip},
		{"after Metadata", func(t testing.TB, c net.Conn, corr int32) { metadataRoundTrip(t, c, 12, corr) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := testkit.TakeGoroutineBaseline()
			srv := socketservertest.NewServer(t, nil, withAPIs, echoMetadata)
			const n = 20
			conns := openParked(t, srv, n, tc.last)
			for _, c := range conns {
				metadataRoundTrip(t, c, 12, 2)
				versionsRoundTrip(t, c, 3)
				tc.last(t, c, 4)
			}
			assert.Less(t, srv.Stats().ParkedConnections, n, "serving unparks")
			waitParked(t, srv, n)
			for _, c := range conns {
				require.NoError(t, c.Close())
			}
			require.Eventually(t, func() bool {
				st := srv.Stats()
				return st.ConnectionCount["PLAINTEXT"] == 0 && st.ParkedConnections == 0
			}, 5*time.Second, 10*time.Millisecond)
			for _, rc := range srv.Registry().Closed(connregistry.Filter{}) {
				assert.Equal(t, connregistry.CloseByClient, rc.CloseReason, rc.ID)
			}
			srv.Close()
			base.RequireReturned(t)
		})
	}
}

// A parked connection has read at most the 4 size bytes of the next
// request; the rest follows through the read buffer, however the client's
// bytes are split, and requests pipelined behind it are served in order.
func TestParkedConnectionReadsSplitFrames(t *testing.T) {
	req := formatter.AppendRequest(nil, metadataReq(12), 7)
	pair := append(append([]byte{}, req...), formatter.AppendRequest(nil, apiVersionsReq(3, "park", "1.0"), 8)...)
	for _, tc := range []struct {
		name   string
		splits []int // write boundaries within the bytes
		bytes  []byte
	}{
		{"whole", nil, req},
		{"one byte first", []int{1}, req},
		{"two then two", []int{2, 4}, req},
		{"size, then the rest", []int{4}, req},
		{"size and one byte", []int{5}, req},
		{"byte at a time for the size", []int{1, 2, 3}, req},
		{"two pipelined requests at once", nil, pair},
		{"two pipelined, split in the second size", []int{len(req) + 2}, pair},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := socketservertest.NewServer(t, nil, withAPIs, echoMetadata)
			c := socketservertest.Dial(t, srv, "PLAINTEXT")
			versionsRoundTrip(t, c, 1)
			waitParked(t, srv, 1)
			prev := 0
			for _, at := range append(tc.splits, len(tc.bytes)) {
				_, err := c.Write(tc.bytes[prev:at])
				require.NoError(t, err)
				prev = at
				time.Sleep(20 * time.Millisecond)
			}
			resp := kmsg.NewPtrMetadataResponse()
			resp.Version = 12
			readResponse(t, c, resp, 7)
			if len(tc.bytes) == len(pair) {
				av := kmsg.NewPtrApiVersionsResponse()
				av.Version = 3
				readResponse(t, c, av, 8)
				require.Zero(t, av.ErrorCode)
			}
			metadataRoundTrip(t, c, 12, 9)
		})
	}
}

// A parked connection closes as any other: by connections.max.idle.ms, by
// an operator's close through the registry, and by Shutdown, which
// returns as soon as parked connections have closed.
func TestParkedConnectionsClose(t *testing.T) {
	t.Run("idle expiry", func(t *testing.T) {
		srv := socketservertest.NewServer(t, config.Properties{"connections.max.idle.ms": "2000"}, withAPIs, echoMetadata)
		c := socketservertest.Dial(t, srv, "PLAINTEXT")
		versionsRoundTrip(t, c, 1)
		waitParked(t, srv, 1)
		requireClosedNoResponse(t, c)
		require.Eventually(t, func() bool { return len(srv.Registry().Closed(connregistry.Filter{})) == 1 }, 5*time.Second, 10*time.Millisecond)
		assert.Equal(t, connregistry.CloseIdle, srv.Registry().Closed(connregistry.Filter{})[0].CloseReason)
		waitParked(t, srv, 0)
	})

	t.Run("operator close", func(t *testing.T) {
		srv := socketservertest.NewServer(t, nil, withAPIs, echoMetadata)
		c := socketservertest.Dial(t, srv, "PLAINTEXT")
		metadataRoundTrip(t, c, 12, 1)
		waitParked(t, srv, 1)
		require.Len(t, srv.Registry().Close(connregistry.Filter{}, connregistry.CloseByOperator), 1)
		requireClosedNoResponse(t, c)
		waitParked(t, srv, 0)
	})

	t.Run("shutdown", func(t *testing.T) {
		base := testkit.TakeGoroutineBaseline()
		srv := socketservertest.NewServer(t, nil, withAPIs, echoMetadata)
		const n = 10
		conns := openParked(t, srv, n, func(t testing.TB, c net.Conn, corr int32) { metadataRoundTrip(t, c, 12, corr) })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		require.NoError(t, srv.Shutdown(ctx))
		assert.Less(t, time.Since(start), 3*time.Second, "parked connections end Shutdown's wait promptly")
		for _, c := range conns {
			requireClosedNoResponse(t, c)
		}
		waitParked(t, srv, 0)
		for _, rc := range srv.Registry().Closed(connregistry.Filter{}) {
			assert.Equal(t, connregistry.CloseServerShutdown, rc.CloseReason, rc.ID)
		}
		base.RequireReturned(t)
	})
}

// A client that sends a request every 250 ms parks at first, then waits
// longer before parking each time it is woken soon after parking, until it
// no longer parks between its requests; idle again, it parks again.
func TestParkWaitAdaptsToTheClient(t *testing.T) {
	srv := socketservertest.NewServer(t, nil, withAPIs, echoMetadata)
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	const rounds = 12
	parkedBefore := make([]bool, rounds)
	for r := range rounds {
		time.Sleep(250 * time.Millisecond)
		parkedBefore[r] = srv.Stats().ParkedConnections == 1
		metadataRoundTrip(t, c, 12, int32(r))
	}
	t.Logf("parked before each request: %v", parkedBefore)
	assert.Contains(t, parkedBefore[:4], true, "parked at first")
	assert.NotContains(t, parkedBefore[rounds-4:], true, "no longer parks between requests 250 ms apart")
	waitParked(t, srv, 1)
}

// A new connection parks after a twentieth of ParkAfter idle, where one that
// has parked and woken waits ParkAfter or longer: with ParkAfter 2 s, a
// new connection parks well within a second of its answer (the code
// before waited the 2 s), and once woken by a request it does not park
// again within a second.
func TestFirstParkComesSooner(t *testing.T) {
	srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) {
		withAPIs(c)
		c.ParkAfter = 2 * time.Second
	}, echoMetadata)
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	versionsRoundTrip(t, c, 0)
	assert.True(t, parksWithin(srv, time.Second), "a new connection parks within a second, with ParkAfter 2 s")
	versionsRoundTrip(t, c, 1)
	assert.False(t, parksWithin(srv, time.Second), "a woken connection parks again within a second, with ParkAfter 2 s")
}

// parksWithin samples srv's parked connections for up to d and reports
// whether any parked.
func parksWithin(srv *socketserver.Server, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if srv.Stats().ParkedConnections != 0 {
			return true
		}
	}
	return false
}

// A TLS connection parks too: the parked goroutine reads the raw bytes of
// the next record, which crypto/tls then reads back in order, whether the
// record arrives whole or split.
func TestTLSConnectionsPark(t *testing.T) {
	pki := newTestPKI(t)
	props := merge(pki.props("none"), config.Properties{
		"listeners":                      "SSL://127.0.0.1:0",
		"security.inter.broker.protocol": "SSL",
	})
	srv := socketservertest.NewServer(t, props, withAPIs, echoMetadata)
	raw := socketservertest.Dial(t, srv, "SSL")
	split := &splitConn{Conn: raw}
	c := tls.Client(split, pki.clientConfig())
	require.NoError(t, c.Handshake())
	metadataRoundTrip(t, c, 12, 1)
	waitParked(t, srv, 1)
	versionsRoundTrip(t, c, 2)
	metadataRoundTrip(t, c, 12, 3)
	waitParked(t, srv, 1)
	// The next record's first 2 bytes alone, then the rest 150 ms after the
	// connection has woken: it waits for the whole record without being
	// asked to park again (its wait before parking, 200 ms or more by now,
	// counts from when it woke).
	var reparked atomic.Bool
	split.between = func() {
		waitParked(t, srv, 0)
		for end := time.Now().Add(150 * time.Millisecond); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			if srv.Stats().ParkedConnections != 0 {
				reparked.Store(true)
			}
		}
	}
	split.splitNext.Store(true)
	time.Sleep(time.Second) // long parked: its last request is well over its wait before parking ago
	metadataRoundTrip(t, c, 12, 4)
	assert.False(t, reparked.Load(), "parked again while the rest of a record was on its way")
	waitParked(t, srv, 1)
	require.NoError(t, c.Close())
	waitParked(t, srv, 0)
}

// splitConn writes the first 2 bytes of a write alone, and the rest once
// between has returned, when splitNext is set.
type splitConn struct {
	net.Conn
	splitNext atomic.Bool
	between   func()
}

func (s *splitConn) Write(b []byte) (int, error) {
	if len(b) > 2 && s.splitNext.CompareAndSwap(true, false) {
		n, err := s.Conn.Write(b[:2])
		if err != nil {
			return n, err
		}
		s.between()
		m, err := s.Conn.Write(b[2:])
		return n + m, err
	}
	return s.Conn.Write(b)
}

// Requests that arrive around the moment a connection is asked to park
// (the processor's tick racing the client) are served, in order, whether
// the connection parked or not.
func TestParkingRacesRequests(t *testing.T) {
	srv := socketservertest.NewServer(t, nil, withAPIs, echoMetadata)
	const conns, rounds = 20, 15
	parkedSeen := make(chan int, conns*rounds)
	var wg sync.WaitGroup
	for i := range conns {
		c := socketservertest.Dial(t, srv, "PLAINTEXT")
		// benchClient checks each answer's correlation id and returns an
		// error rather than failing the test from this goroutine.
		clients := []*benchClient{newBenchClient(c, metadataReq(12)), newBenchClient(c, apiVersionsReq(3, "park", "1.0"))}
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			for r := range rounds {
				// Gaps around the wait before parking (100 ms at
				// first, longer as it adapts) and the 50 ms tick.
				time.Sleep(time.Duration(60+rng.IntN(440)) * time.Millisecond)
				if err := clients[r%2].roundTrip(); err != nil {
					t.Errorf("connection %d, round %d: %v", i, r, err)
					return
				}
				parkedSeen <- srv.Stats().ParkedConnections
			}
		})
	}
	wg.Wait()
	close(parkedSeen)
	most := 0
	for n := range parkedSeen {
		most = max(most, n)
	}
	assert.Positive(t, most, "some connections parked between requests")
}

// Config.ParkAfter: a negative value turns parking off (an idle connection
// never parks, and idle expiry still closes it); a positive one is the
// wait before the first park, in place of DefaultParkAfter.
func TestParkAfterConfigurable(t *testing.T) {
	t.Run("negative: never parks", func(t *testing.T) {
		srv := socketservertest.NewServer(t, config.Properties{"connections.max.idle.ms": "1500"},
			func(c *socketserver.Config) { withAPIs(c); c.ParkAfter = -1 }, echoMetadata)
		c := socketservertest.Dial(t, srv, "PLAINTEXT")
		metadataRoundTrip(t, c, 12, 1)
		assert.False(t, parksWithin(srv, 10*socketserver.DefaultParkAfter), "parked with parking off")
		metadataRoundTrip(t, c, 12, 2)
		requireClosedNoResponse(t, c) // connections.max.idle.ms still applies
		closed := srv.Registry().Closed(connregistry.Filter{})
		require.Len(t, closed, 1)
		assert.Equal(t, connregistry.CloseIdle, closed[0].CloseReason)
	})

	t.Run("custom wait", func(t *testing.T) {
		const wait = 1500 * time.Millisecond
		srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) { withAPIs(c); c.ParkAfter = wait }, echoMetadata)
		c := socketservertest.Dial(t, srv, "PLAINTEXT")
		metadataRoundTrip(t, c, 12, 1)
		idleSince := time.Now()
		assert.False(t, parksWithin(srv, wait/40), "parked before its first wait, a twentieth of ParkAfter")
		waitParked(t, srv, 1)
		assert.GreaterOrEqual(t, time.Since(idleSince), wait/40, "parked before its first wait, a twentieth of ParkAfter")
		metadataRoundTrip(t, c, 12, 2) // a parked connection still serves
		assert.False(t, parksWithin(srv, wait), "parked again before ParkAfter, woken at once")
	})
}

// Connections waiting for their next request, not parked yet, wait under
// small frames: the runtime starts every new goroutine on the average stack
// its last collection saw, so a collection during a burst of new
// connections, which mostly wait so, must not find that average above the
// smallest stack, or every connection and every goroutine it parks on
// starts on 4 KiB until the next collection (an idle server may not run
// one for minutes). Through a PROXY listener too, whose connections start
// under the header's reading. The race detector's larger frames need more,
// so it runs without -race.
func TestWaitingConnectionsKeepNewStacksSmall(t *testing.T) {
	if raceEnabled {
		t.Skip("race-instrumented frames are larger")
	}
	noPark := func(c *socketserver.Config) { withAPIs(c); c.ParkAfter = -1 }
	for _, tc := range []struct {
		name   string
		start  func(t *testing.T) *socketserver.Server
		header []byte
	}{
		{"PLAINTEXT", func(t *testing.T) *socketserver.Server {
			return socketservertest.NewServer(t, nil, noPark, echoMetadata)
		}, nil},
		{"PROXY", func(t *testing.T) *socketserver.Server {
			return proxyServer(t, &proxyRecorder{}, nil, func(c *socketserver.Config) { c.ParkAfter = -1 })
		}, []byte("PROXY TCP4 192.0.2.10 10.0.0.1 50123 9092\r\n")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer debug.SetGCPercent(debug.SetGCPercent(-1)) // one collection, below, once all wait
			srv := tc.start(t)
			const n = 500
			conns := make([]net.Conn, n)
			for i := range conns {
				c := socketservertest.Dial(t, srv, "PLAINTEXT")
				conns[i] = c
				if tc.header != nil {
					_, err := c.Write(tc.header)
					require.NoError(t, err)
				}
				versionsRoundTrip(t, c, 1)
			}
			assert.Zero(t, srv.Stats().ParkedConnections)
			runtime.GC()
			s := []metrics.Sample{{Name: "/gc/stack/starting-size:bytes"}}
			metrics.Read(s)
			assert.EqualValues(t, 2048, s[0].Value.Uint64(), "new goroutines start on this stack after a collection that saw %d connections waiting for a request", n)
			for _, c := range conns {
				require.NoError(t, c.Close())
			}
		})
	}
}
