package socketserver_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// proxyProps makes the PLAINTEXT listener of socketservertest.NewServer
// require the PROXY protocol from the loopback network, over more props.
func proxyProps(more ...config.Properties) config.Properties {
	return merge(append([]config.Properties{{
		config.KeyProxyProtocol:                "required",
		config.KeyProxyProtocolTrustedNetworks: "127.0.0.0/8",
	}}, more...)...)
}

// proxyRecorder records the connection hooks a PROXY listener's
// connections go through.
type proxyRecorder struct {
	mu       sync.Mutex
	created  []connregistry.Info
	closed   []connregistry.Info
	rejected []netip.Addr
	refused  []refusal
	requests []connregistry.Info
	contexts []connregistry.Info
}

type refusal struct {
	addr netip.AddrPort
	err  error
}

func (r *proxyRecorder) OnConnCreated(info connregistry.Info) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.created = append(r.created, info)
}

func (r *proxyRecorder) OnConnClosed(info connregistry.Info, _ connregistry.CloseReason) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = append(r.closed, info)
}

func (r *proxyRecorder) OnConnRejected(_ protocolmap.ListenerName, addr netip.Addr, _ error, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rejected = append(r.rejected, addr)
}

func (r *proxyRecorder) OnProxyRefused(_ protocolmap.ListenerName, addr netip.AddrPort, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refused = append(r.refused, refusal{addr, err})
}

func (r *proxyRecorder) snapshot() proxyRecorder {
	r.mu.Lock()
	defer r.mu.Unlock()
	return proxyRecorder{created: slicesClone(r.created), closed: slicesClone(r.closed), rejected: slicesClone(r.rejected),
		refused: slicesClone(r.refused), requests: slicesClone(r.requests), contexts: slicesClone(r.contexts)}
}

func slicesClone[T any](s []T) []T { return append([]T(nil), s...) }

// proxyServer starts a server whose PLAINTEXT listener requires the PROXY
// protocol (props over proxyProps), with rec's hooks, a ConnContext that
// records what it is given, and a handler that answers everything and
// records each request's connection.
func proxyServer(t *testing.T, rec *proxyRecorder, props config.Properties, configure ...func(*socketserver.Config)) *socketserver.Server {
	t.Helper()
	return socketservertest.NewServer(t, proxyProps(props), func(c *socketserver.Config) {
		c.APIs = allAPIs()
		c.Hooks = []socketserver.Hook{rec}
		c.ConnContext = func(ctx context.Context, _ net.Conn, info connregistry.Info) context.Context {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.contexts = append(rec.contexts, info)
			return ctx
		}
		for _, f := range configure {
			f(c)
		}
	}, socketserver.HandlerFunc(func(r *socketserver.Request) {
		rec.mu.Lock()
		rec.requests = append(rec.requests, *r.Conn)
		rec.mu.Unlock()
		_ = respondEmpty(r)
	}))
}

// v2 formats a PROXY v2 header (PROXY command) from src, with tlvs.
func v2(t testing.TB, src string, tlvs ...proxyproto.TLV) []byte {
	t.Helper()
	return v2Command(t, proxyproto.PROXY, src, tlvs...)
}

func v2Command(t testing.TB, command proxyproto.ProtocolVersionAndCommand, src string, tlvs ...proxyproto.TLV) []byte {
	t.Helper()
	s := net.TCPAddrFromAddrPort(netip.MustParseAddrPort(src))
	dst := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 9092}
	if s.IP.To4() == nil {
		dst = &net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 9092}
	}
	h := proxyproto.HeaderProxyFromAddrs(2, s, dst)
	h.Command = command
	require.NoError(t, h.SetTLVs(tlvs))
	b, err := h.Format()
	require.NoError(t, err)
	return b
}

// listed returns the registry's open connection whose client address is
// addr, waiting for it to appear.
func listed(t testing.TB, srv *socketserver.Server, addr netip.AddrPort) connregistry.Conn {
	t.Helper()
	var found connregistry.Conn
	waitFor(t, 5*time.Second, func() bool {
		for _, c := range srv.Registry().Snapshot(connregistry.Filter{}) {
			if c.ClientAddr == addr {
				found = c
				return true
			}
		}
		return false
	}, "no open connection from "+addr.String())
	return found
}

// A connection through a load balancer, with a v1 or v2 header, is the
// client's from its first request: its id (Kafka's format, with the
// client's address), Info.ClientAddr in the registry, the requests, the
// hooks and ConnContext; the balancer is Info.ProxyAddr. Bytes sent with
// the header (the first request, in the same write) are served, and a
// header sent in pieces is read whole.
func TestProxyProtocolRealAddress(t *testing.T) {
	cases := []struct {
		name   string
		header []byte
		client string
		inID   string // the client as Kafka writes it in a connection id
		pieces bool
	}{
		{"v1", []byte("PROXY TCP4 192.0.2.10 10.0.0.1 50123 9092\r\n"), "192.0.2.10:50123", "192.0.2.10:50123", false},
		{"v1 IPv6, in pieces", []byte("PROXY TCP6 2001:db8::7 2001:db8::1 40000 9092\r\n"), "[2001:db8::7]:40000", "2001:db8:0:0:0:0:0:7:40000", true},
		{"v2", v2(t, "198.51.100.4:61000"), "198.51.100.4:61000", "198.51.100.4:61000", false},
		{"v2 IPv6, in pieces", v2(t, "[2001:db8::8]:41000"), "[2001:db8::8]:41000", "2001:db8:0:0:0:0:0:8:41000", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &proxyRecorder{}
			srv := proxyServer(t, rec, nil)
			c := socketservertest.Dial(t, srv, "PLAINTEXT")
			req := requestFrame(metadataReq(9), 1, strp("proxied"))
			if tc.pieces {
				for _, piece := range [][]byte{tc.header[:3], tc.header[3:9], tc.header[9:]} {
					write(t, c, piece)
					time.Sleep(20 * time.Millisecond)
				}
				write(t, c, req)
			} else {
				write(t, c, append(bytes.Clone(tc.header), req...))
			}
			resp := kmsg.NewPtrMetadataResponse()
			resp.Version = 9
			readResponse(t, c, resp, 1)

			client := netip.MustParseAddrPort(tc.client)
			balancer := netip.MustParseAddrPort(c.LocalAddr().String())
			conn := listed(t, srv, client)
			assert.Equal(t, balancer, conn.ProxyAddr)
			local := srv.Addr("PLAINTEXT").String()
			assert.True(t, strings.HasPrefix(conn.ID, local+"-"+tc.inID+"-"), "the id has the client's address: %s", conn.ID)
			assert.NotContains(t, conn.ID, c.LocalAddr().String(), "the id has not the balancer's")
			assert.Nil(t, conn.ProxyTLVs)

			got := rec.snapshot()
			require.Len(t, got.created, 1)
			assert.Equal(t, client, got.created[0].ClientAddr, "OnConnCreated")
			assert.Equal(t, balancer, got.created[0].ProxyAddr)
			assert.Equal(t, conn.ID, got.created[0].ID)
			require.Len(t, got.contexts, 1)
			assert.Equal(t, client, got.contexts[0].ClientAddr, "ConnContext")
			require.Len(t, got.requests, 1)
			assert.Equal(t, client, got.requests[0].ClientAddr, "Request.Conn")
			assert.Equal(t, balancer, got.requests[0].ProxyAddr)

			// The address filter of a listing and of a close selects by the client's.
			f := connregistry.Filter{ClientAddress: strp(client.Addr().String())}
			require.NoError(t, f.Validate())
			assert.Len(t, srv.Registry().Snapshot(f), 1)
			f = connregistry.Filter{ClientAddress: strp("127.0.0.1")}
			require.NoError(t, f.Validate())
			assert.Empty(t, srv.Registry().Snapshot(f), "the balancer's address selects nothing")

			c.Close()
			waitFor(t, 5*time.Second, func() bool { return len(rec.snapshot().closed) == 1 }, "OnConnClosed")
			assert.Equal(t, client, rec.snapshot().closed[0].ClientAddr)
			total, _, byIP := socketserver.QuotaCounts(srv)
			assert.Zero(t, total)
			assert.Empty(t, byIP, "released under the address it was counted under")
		})
	}
}

// A v2 header's fields reach the host as Info.ProxyTLVs (NOOP padding
// left out), with helpers for the authority and the cloud endpoint ids; a
// header larger than the connection's read buffer is read too. A LOCAL
// header (the balancer's own connection: a health check) keeps the
// socket's address, as does v1's UNKNOWN.
func TestProxyProtocolTLVsAndLocal(t *testing.T) {
	rec := &proxyRecorder{}
	srv := proxyServer(t, rec, nil)
	big := bytes.Repeat([]byte("z"), 2000)
	header := v2(t, "203.0.113.9:5000",
		proxyproto.TLV{Type: proxyproto.PP2_TYPE_AUTHORITY, Value: []byte("cluster-a.kafka.example.com")},
		proxyproto.TLV{Type: proxyproto.PP2_TYPE_NOOP, Value: make([]byte, 16)},
		proxyproto.TLV{Type: 0xEA, Value: []byte("\x01vpce-0123456789abcdef0")},
		proxyproto.TLV{Type: 0xEE, Value: []byte{0x01, 0x2a, 0, 0, 0}},
		proxyproto.TLV{Type: 0xE0, Value: []byte{0, 0, 0, 0, 0, 0, 0, 7}},
		proxyproto.TLV{Type: proxyproto.PP2_TYPE_UNIQUE_ID, Value: big})
	require.Greater(t, len(header), 1024)
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	write(t, c, append(header, requestFrame(metadataReq(9), 1, nil)...))
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 9
	readResponse(t, c, resp, 1)

	conn := listed(t, srv, netip.MustParseAddrPort("203.0.113.9:5000"))
	require.Len(t, conn.ProxyTLVs, 5)
	assert.Equal(t, "cluster-a.kafka.example.com", conn.ProxyAuthority())
	assert.Equal(t, "vpce-0123456789abcdef0", conn.ProxyAWSVPCEndpointID())
	link, ok := conn.ProxyAzureLinkID()
	assert.True(t, ok)
	assert.Equal(t, uint32(42), link)
	psc, ok := conn.ProxyGCPConnectionID()
	assert.True(t, ok)
	assert.Equal(t, uint64(7), psc)
	id, ok := conn.ProxyTLV(connregistry.ProxyTLVUniqueID)
	assert.True(t, ok)
	assert.Equal(t, big, id)
	got := rec.snapshot()
	require.Len(t, got.requests, 1)
	assert.Equal(t, "cluster-a.kafka.example.com", got.requests[0].ProxyAuthority(), "the request's copy has them")

	for _, local := range [][]byte{v2Command(t, proxyproto.LOCAL, "203.0.113.9:5000"), []byte("PROXY UNKNOWN\r\n")} {
		c := socketservertest.Dial(t, srv, "PLAINTEXT")
		write(t, c, append(local, requestFrame(metadataReq(9), 1, nil)...))
		readResponse(t, c, resp, 1)
		sock := netip.MustParseAddrPort(c.LocalAddr().String())
		conn := listed(t, srv, sock)
		assert.Equal(t, sock, conn.ProxyAddr, "the balancer is the client")
		assert.Contains(t, conn.ID, "-"+sock.String()+"-")
		c.Close()
	}
}

// A connection from outside the trusted networks is closed before a byte
// is read, and one without a valid header within the handshake timeout
// is closed too: each is logged once, reported to HookProxyRefused and
// kept among the registry's closed connections, under the socket's
// address, and gives its quota slot back. None is created or served. A
// connection that closes before sending anything is not refused.
func TestProxyProtocolRefused(t *testing.T) {
	v2Long := v2(t, "192.0.2.1:1")
	v2Long[14], v2Long[15] = 0x10, 0x01 // 4097 bytes after the prefix
	cases := []struct {
		name    string
		trusted string
		send    []byte
		want    error
	}{
		{"untrusted address", "127.0.0.2/32,::1", []byte("PROXY TCP4 192.0.2.10 10.0.0.1 50123 9092\r\n"), socketserver.ErrProxyUntrusted},
		{"no header: a Kafka request", "127.0.0.0/8", requestFrame(metadataReq(9), 1, nil), socketserver.ErrProxyHeader},
		{"no header: TLS", "127.0.0.0/8", []byte("\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03"), socketserver.ErrProxyHeader},
		{"v1 too long", "127.0.0.0/8", []byte("PROXY TCP4 " + strings.Repeat("9", 100) + "\r\n"), socketserver.ErrProxyHeader},
		{"v2 claims over 4 KiB", "127.0.0.0/8", v2Long, socketserver.ErrProxyHeader},
		{"timeout: half a header", "127.0.0.0/8", []byte("PROXY TCP4 192.0.2.10"), socketserver.ErrProxyHeader},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &proxyRecorder{}
			var logs testkit.SyncBuffer
			srv := proxyServer(t, rec, config.Properties{
				config.KeyProxyProtocolTrustedNetworks: tc.trusted,
				"kafkanet.handshake.timeout.ms":        "300",
			}, func(c *socketserver.Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
			c := socketservertest.Dial(t, srv, "PLAINTEXT")
			_, _ = c.Write(tc.send) // the server may have closed already
			requireClosedNoResponse(t, c)

			sock := netip.MustParseAddrPort(c.LocalAddr().String())
			waitFor(t, 5*time.Second, func() bool { return len(rec.snapshot().refused) == 1 }, "OnProxyRefused")
			got := rec.snapshot()
			assert.Equal(t, sock, got.refused[0].addr)
			assert.ErrorIs(t, got.refused[0].err, tc.want)
			assert.Empty(t, got.created)
			assert.Empty(t, got.closed)
			assert.Empty(t, got.requests)
			assert.Equal(t, 1, strings.Count(logs.String(), "refused connection: PROXY protocol"), logs.String())

			closed := srv.Registry().Closed(connregistry.Filter{})
			require.Len(t, closed, 1)
			assert.Equal(t, connregistry.CloseProxyRefused, closed[0].CloseReason)
			assert.Equal(t, sock, closed[0].ClientAddr)
			assert.Contains(t, closed[0].ID, "-"+sock.String()+"-")
			assert.Empty(t, srv.Registry().Snapshot(connregistry.Filter{}))
			waitFor(t, 5*time.Second, func() bool { return quotaTotal(srv) == 0 }, "the quota slot is given back")
		})
	}

	t.Run("nothing sent", func(t *testing.T) {
		rec := &proxyRecorder{}
		srv := proxyServer(t, rec, nil)
		c := socketservertest.Dial(t, srv, "PLAINTEXT")
		require.NoError(t, c.(*net.TCPConn).CloseWrite())
		requireClosedNoResponse(t, c)
		waitFor(t, 5*time.Second, func() bool { return quotaTotal(srv) == 0 }, "the quota slot is given back")
		assert.Empty(t, rec.snapshot().refused)
		assert.Empty(t, srv.Registry().Closed(connregistry.Filter{}))
	})
}

// The header is read on the connection's own goroutine: connections that
// send half a header, or nothing, do not hold up the acceptor, and a
// connection behind them is served at once.
func TestProxyProtocolSlowSendersDoNotStallAccepting(t *testing.T) {
	srv := proxyServer(t, &proxyRecorder{}, config.Properties{"num.network.threads": "1"})
	for i := range 20 {
		c := socketservertest.Dial(t, srv, "PLAINTEXT")
		if i%2 == 0 {
			write(t, c, []byte("PROXY TCP4 192.0.2."))
		}
	}
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	start := time.Now()
	write(t, c, append([]byte("PROXY TCP4 192.0.2.200 10.0.0.1 1000 9092\r\n"), requestFrame(metadataReq(9), 1, nil)...))
	require.NoError(t, c.SetReadDeadline(time.Now().Add(2*time.Second)))
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 9
	readResponse(t, c, resp, 1)
	assert.Less(t, time.Since(start), time.Second, "served behind 20 stalled connections")
}

// headerConn writes a PROXY header with its first write, as a balancer
// sends the header and the client's first bytes together.
type headerConn struct {
	net.Conn
	header []byte
}

func (c *headerConn) Write(b []byte) (int, error) {
	if c.header != nil {
		h := c.header
		c.header = nil
		n, err := c.Conn.Write(append(h, b...))
		return max(n-len(h), 0), err
	}
	return c.Conn.Write(b)
}

// TLS runs after the header: the client's hello, whether it comes in the
// header's segment or after it, reaches crypto/tls unchanged; the
// principal comes from the client certificate and the address from the
// header.
func TestProxyProtocolThenTLS(t *testing.T) {
	pki := newTestPKI(t)
	props := merge(pki.props("required"), config.Properties{
		"listeners":                      "SSL://127.0.0.1:0",
		"security.inter.broker.protocol": "SSL",
		"ssl.principal.mapping.rules":    cnRule,
		config.KeyProxyProtocol:          "required",
		"listener.name.ssl." + config.KeyProxyProtocolTrustedNetworks: "127.0.0.1",
	})
	srv := socketservertest.NewServer(t, props, withAPIs, answerAll)
	header := []byte("PROXY TCP4 192.0.2.77 10.0.0.1 44444 9093\r\n")
	for _, together := range []bool{true, false} {
		t.Run("together "+strconv.FormatBool(together), func(t *testing.T) {
			raw := socketservertest.Dial(t, srv, "SSL")
			var nc net.Conn = raw
			if together {
				nc = &headerConn{Conn: raw, header: header}
			} else {
				write(t, raw, header)
			}
			tc := tls.Client(nc, pki.clientConfig(pki.clientCert(aliceDN)))
			require.NoError(t, tc.Handshake())
			send(t, tc, metadataReq(9), 1)
			resp := kmsg.NewPtrMetadataResponse()
			resp.Version = 9
			readResponse(t, tc, resp, 1)

			conn := listed(t, srv, netip.MustParseAddrPort("192.0.2.77:44444"))
			assert.Equal(t, "alice", conn.Principal.Name)
			assert.NotZero(t, conn.TLSVersion)
			assert.Equal(t, netip.MustParseAddrPort(raw.LocalAddr().String()), conn.ProxyAddr)
			tc.Close()
			waitFor(t, 5*time.Second, func() bool { return len(srv.Registry().Snapshot(connregistry.Filter{})) == 0 }, "closed")
		})
	}
}

// The per-address quotas apply to the client's address from the header,
// not the balancer's: behind one balancer address, max.connections.per.ip
// counts each client, the creation rate holds one client's connection
// then closes it, and each connection gives back what it took.
func TestProxyProtocolPerIPQuotas(t *testing.T) {
	rec := &proxyRecorder{}
	srv := proxyServer(t, rec, config.Properties{
		"max.connections.per.ip":                    "1",
		config.KeyIPConnectionCreationRateOverrides: "192.0.2.99:0",
		"quota.window.num":                          "2",
	})
	dial := func(header string) net.Conn {
		c := dialFrom(t, srv, "PLAINTEXT", "127.0.0.1")
		write(t, c, []byte(header))
		return c
	}
	first := dial("PROXY TCP4 192.0.2.1 10.0.0.1 1001 9092\r\n")
	require.True(t, served(t, first, 1, 5*time.Second))
	other := dial("PROXY TCP4 192.0.2.2 10.0.0.1 1002 9092\r\n")
	require.True(t, served(t, other, 1, 5*time.Second), "another client behind the same balancer address")

	second := dial("PROXY TCP4 192.0.2.1 10.0.0.1 1003 9092\r\n")
	requireClosedNoResponse(t, second)
	waitFor(t, 5*time.Second, func() bool { return len(rec.snapshot().rejected) == 1 }, "OnConnRejected")
	assert.Equal(t, netip.MustParseAddr("192.0.2.1"), rec.snapshot().rejected[0], "rejected under the client's address")
	assert.Empty(t, rec.snapshot().refused, "a quota's rejection is not a PROXY refusal")

	start := time.Now()
	throttled := dial("PROXY TCP4 192.0.2.99 10.0.0.1 1004 9092\r\n")
	requireClosedNoResponse(t, throttled)
	assert.InDelta(t, 1000, time.Since(start).Milliseconds(), 400, "a rate of 0 holds the connection for a window")

	_, _, byIP := socketserver.QuotaCounts(srv)
	assert.Equal(t, map[netip.Addr]int{netip.MustParseAddr("192.0.2.1"): 1, netip.MustParseAddr("192.0.2.2"): 1}, byIP)
	first.Close()
	waitFor(t, 5*time.Second, func() bool {
		_, _, byIP := socketserver.QuotaCounts(srv)
		return byIP[netip.MustParseAddr("192.0.2.1")] == 0
	}, "released under the client's address")
	third := dial("PROXY TCP4 192.0.2.1 10.0.0.1 1005 9092\r\n")
	require.True(t, served(t, third, 1, 5*time.Second), "the client's slot came back when its connection closed")
}

// Shutdown and Close do not wait for a header that is not coming: the
// pending connection is closed at once.
func TestProxyProtocolShutdownClosesPending(t *testing.T) {
	for _, shutdown := range []bool{true, false} {
		t.Run("shutdown "+strconv.FormatBool(shutdown), func(t *testing.T) {
			srv, stop, err := socketservertest.Start(proxyProps(), withAPIs, answerAll)
			require.NoError(t, err)
			defer stop()
			c := socketservertest.Dial(t, srv, "PLAINTEXT")
			write(t, c, []byte("PROXY TCP4 "))
			waitFor(t, 5*time.Second, func() bool { return quotaTotal(srv) == 1 }, "accepted")
			start := time.Now()
			if shutdown {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				require.NoError(t, srv.Shutdown(ctx))
			} else {
				require.NoError(t, srv.Close())
			}
			assert.Less(t, time.Since(start), 2*time.Second, "waited for the header")
			requireClosedNoResponse(t, c)
		})
	}
}

// Stats counts the sockets of a PROXY listener that wait for their header
// apart from its connections: pending until the header is read, then a
// connection; a listener without the protocol has no entry.
func TestProxyProtocolPendingInStats(t *testing.T) {
	srv := proxyServer(t, &proxyRecorder{}, nil)
	stats := func() (pending map[protocolmap.ListenerName]int, conns int) {
		st := srv.Stats()
		return st.PendingProxyHeaders, st.ConnectionCount["PLAINTEXT"]
	}
	pending, conns := stats()
	require.Equal(t, map[protocolmap.ListenerName]int{"PLAINTEXT": 0}, pending)
	require.Zero(t, conns)

	var waiting []net.Conn
	for range 3 {
		c := socketservertest.Dial(t, srv, "PLAINTEXT")
		write(t, c, []byte("PROXY TCP4 192.0.2.")) // a header cut short
		waiting = append(waiting, c)
	}
	waitFor(t, 5*time.Second, func() bool { p, n := stats(); return p["PLAINTEXT"] == 3 && n == 0 }, "three sockets pending, no connection")

	write(t, waiting[0], append([]byte("7 10.0.0.1 1000 9092\r\n"), requestFrame(metadataReq(9), 1, nil)...))
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 9
	readResponse(t, waiting[0], resp, 1)
	pending, conns = stats()
	assert.Equal(t, 2, pending["PLAINTEXT"], "the socket whose header came is no longer pending")
	assert.Equal(t, 1, conns)

	for _, c := range waiting[1:] {
		require.NoError(t, c.Close())
	}
	waitFor(t, 5*time.Second, func() bool { p, _ := stats(); return p["PLAINTEXT"] == 0 }, "sockets closed before their header still pending")

	plain := socketservertest.NewServer(t, nil, withAPIs, answerAll)
	assert.Nil(t, plain.Stats().PendingProxyHeaders, "no listener requires the PROXY protocol")
}

// kafkanet.proxy.protocol and kafkanet.proxy.protocol.trusted.networks are
// read per listener (the listener.name.<l>. form first), into
// ListenerConfig.ProxyProtocol; bad values and a requirement without
// trusted networks are errors naming the key. New refuses the same
// mistakes in a Config built in code.
func TestProxyProtocolConfig(t *testing.T) {
	read := func(props config.Properties) (map[protocolmap.ListenerName]socketserver.ProxyProtocol, error) {
		cfg, err := config.Server(merge(config.Properties{
			"listeners":                      "PLAINTEXT://127.0.0.1:0,LB://127.0.0.1:0",
			"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,LB:PLAINTEXT",
		}, props))
		if err != nil {
			return nil, err
		}
		out := map[protocolmap.ListenerName]socketserver.ProxyProtocol{}
		for name, l := range cfg.PerListener {
			out[name] = l.ProxyProtocol
		}
		return out, nil
	}
	got, err := read(nil)
	require.NoError(t, err)
	assert.Equal(t, socketserver.ProxyProtocol{}, got["LB"], "none by default")

	got, err = read(config.Properties{
		"listener.name.lb.kafkanet.proxy.protocol":                  " Required ",
		"listener.name.lb.kafkanet.proxy.protocol.trusted.networks": " 10.1.2.0/24 , 10.1.2.3/24,fd00::/8, 192.0.2.7, ::ffff:198.51.100.0/120 ,",
	})
	require.NoError(t, err)
	assert.Equal(t, socketserver.ProxyProtocol{}, got["PLAINTEXT"])
	assert.Equal(t, socketserver.ProxyProtocol{Mode: socketserver.ProxyProtocolRequired, TrustedNetworks: []netip.Prefix{
		netip.MustParsePrefix("10.1.2.0/24"), netip.MustParsePrefix("fd00::/8"), netip.MustParsePrefix("192.0.2.7/32"),
		netip.MustParsePrefix("198.51.100.0/24"),
	}}, got["LB"])
	assert.Equal(t, "required", got["LB"].Mode.String())

	got, err = read(config.Properties{
		config.KeyProxyProtocol:                              "required",
		config.KeyProxyProtocolTrustedNetworks:               "0.0.0.0/0,::/0",
		"listener.name.plaintext." + config.KeyProxyProtocol: "none",
	})
	require.NoError(t, err)
	assert.Equal(t, socketserver.ProxyProtocolNone, got["PLAINTEXT"].Mode, "the listener's own setting wins")
	assert.Equal(t, socketserver.ProxyProtocolRequired, got["LB"].Mode, "the broker-wide one applies to the others")
	assert.Len(t, got["LB"].TrustedNetworks, 2)

	for _, tc := range []struct {
		name  string
		props config.Properties
		key   string
	}{
		{"bad mode", config.Properties{"listener.name.lb.kafkanet.proxy.protocol": "v2"}, "listener.name.lb.kafkanet.proxy.protocol"},
		{"no trusted networks", config.Properties{"listener.name.lb.kafkanet.proxy.protocol": "required"},
			"listener.name.lb.kafkanet.proxy.protocol.trusted.networks"},
		{"empty trusted networks", config.Properties{config.KeyProxyProtocol: "required", config.KeyProxyProtocolTrustedNetworks: " , "},
			config.KeyProxyProtocolTrustedNetworks},
		{"bad network", config.Properties{"listener.name.lb.kafkanet.proxy.protocol.trusted.networks": "10.0.0.0/33"},
			"listener.name.lb.kafkanet.proxy.protocol.trusted.networks"},
		{"a host name", config.Properties{config.KeyProxyProtocolTrustedNetworks: "lb.example.com"},
			config.KeyProxyProtocolTrustedNetworks},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := read(tc.props)
			var ce *config.Error
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tc.key, ce.Key)
			assert.ErrorIs(t, err, listener.ErrInvalidValue)
		})
	}

	lc, err := config.Listeners(config.Properties{"listeners": "PLAINTEXT://127.0.0.1:0"})
	require.NoError(t, err)
	for _, p := range []socketserver.ProxyProtocol{
		{Mode: socketserver.ProxyProtocolRequired},
		{Mode: socketserver.ProxyProtocolRequired, TrustedNetworks: []netip.Prefix{{}}},
		{Mode: 7, TrustedNetworks: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}},
	} {
		_, err := socketserver.New(socketserver.Config{Listeners: lc, PerListener: map[protocolmap.ListenerName]*socketserver.ListenerConfig{
			"PLAINTEXT": {ProxyProtocol: p},
		}})
		var ce *config.Error
		require.ErrorAs(t, err, &ce, "%+v", p)
		assert.True(t, strings.HasPrefix(ce.Key, "listener.name.plaintext.kafkanet.proxy.protocol"), ce.Key)
	}
}

// A non-IP connection (a host's listener: here in memory) is never
// trusted: it cannot be told apart from any other.
func TestProxyProtocolPipeIsNotTrusted(t *testing.T) {
	pipe := socketservertest.NewPipeListener("PLAINTEXT")
	rec := &proxyRecorder{}
	srv := proxyServer(t, rec, config.Properties{config.KeyProxyProtocolTrustedNetworks: "0.0.0.0/0,::/0"},
		func(c *socketserver.Config) {
			c.Listen = func(context.Context, listener.Listener) (net.Listener, error) { return pipe, nil }
		})
	_ = srv
	c, err := pipe.Dial(context.Background())
	require.NoError(t, err)
	defer c.Close()
	go func() { _, _ = c.Write([]byte("PROXY TCP4 192.0.2.10 10.0.0.1 50123 9092\r\n")) }()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second)) // the server may have closed it already
	_, err = c.Read(make([]byte, 1))
	require.Error(t, err)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server kept the connection open")
	waitFor(t, 5*time.Second, func() bool { return len(rec.snapshot().refused) == 1 }, "OnProxyRefused")
	assert.True(t, errors.Is(rec.snapshot().refused[0].err, socketserver.ErrProxyUntrusted))
}
