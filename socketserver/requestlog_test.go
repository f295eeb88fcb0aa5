package socketserver_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// requestLogs records every RequestDone its hook is given: a copy of each
// (the pointer is valid during the call only), and each as %+v prints it.
type requestLogs struct {
	mu      sync.Mutex
	logs    []socketserver.RequestDone
	printed strings.Builder
}

var _ socketserver.HookRequestDone = (*requestLogs)(nil)

func (r *requestLogs) OnRequestDone(l *socketserver.RequestDone) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logs = append(r.logs, *l)
	fmt.Fprintf(&r.printed, "%+v\n", *l)
}

// all returns the logs recorded so far.
func (r *requestLogs) all() []socketserver.RequestDone {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]socketserver.RequestDone(nil), r.logs...)
}

// printedString returns every log recorded so far as %+v printed it.
func (r *requestLogs) printedString() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.printed.String()
}

// of returns the logs of connection id, once there are n of them: a
// request is logged after its response is written, so the client may read
// the response first.
func (r *requestLogs) of(t testing.TB, id string, n int) []socketserver.RequestDone {
	t.Helper()
	var out []socketserver.RequestDone
	require.Eventually(t, func() bool {
		out = out[:0]
		for _, l := range r.all() {
			if l.Conn.ID == id {
				out = append(out, l)
			}
		}
		return len(out) >= n
	}, 10*time.Second, time.Millisecond, "connection %s: %d of %d requests logged", id, len(out), n)
	return out
}

// connID returns the id of the server's open connection whose client
// address is c's local address, once the server has registered it.
func connID(t testing.TB, srv *socketserver.Server, c net.Conn) string {
	t.Helper()
	local := netip.MustParseAddrPort(c.LocalAddr().String())
	var id string
	require.Eventually(t, func() bool {
		for _, rc := range srv.Registry().Snapshot(connregistry.Filter{}) {
			if rc.ClientAddr == local {
				id = rc.ID
				return true
			}
		}
		return false
	}, 10*time.Second, time.Millisecond, "no connection from %s", local)
	return id
}

// Every request is logged once, in order, whoever answered it, with its
// header, sizes (the frame without its size prefix; the response with
// it), connection and latency: the server's own answers (ApiVersions,
// ListClientConnections, SaslHandshake after authentication) and the
// host's (a response, NoResponse, CloseConnection), on a raw connection.
func TestRequestLog(t *testing.T) {
	logs := &requestLogs{}
	done := &recorder{}
	handler := socketserver.HandlerFunc(func(r *socketserver.Request) {
		switch r.APIKey {
		case 3: // Metadata
			_ = r.Respond(kmsg.NewPtrMetadataResponse())
		case 0: // Produce, acks=0
			_ = r.NoResponse()
		default:
			_ = r.CloseConnection()
		}
	})
	srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) {
		c.APIs = append(slices.DeleteFunc(allAPIs(), func(a socketserver.API) bool {
			return a.Key == connregistry.DefaultListAPIKey || a.Key == connregistry.DefaultCloseAPIKey
		}), socketserver.ListClientConnectionsAPI(connregistry.DefaultListAPIKey, nil),
			socketserver.CloseClientConnectionsAPI(connregistry.DefaultCloseAPIKey, nil))
		c.Hooks = []socketserver.Hook{logs, done}
	}, handler)
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	id := connID(t, srv, c)

	produce := kmsg.NewPtrProduceRequest()
	produce.Version, produce.Acks = 9, 0
	saslHandshake := kmsg.NewPtrSASLHandshakeRequest()
	saslHandshake.Version, saslHandshake.Mechanism = 1, "PLAIN"
	list := &connregistry.ListClientConnectionsRequest{APIKey: connregistry.DefaultListAPIKey}
	closeNone := &connregistry.CloseClientConnectionsRequest{APIKey: connregistry.DefaultCloseAPIKey, ConnectionIDs: []string{"no-such-connection"}}
	steps := []struct {
		req        kmsg.Request
		response   bool
		server     bool
		closed     bool
		softwareIs string // the client software the log shows
	}{
		{apiVersionsReq(3, "logging-client", "7.1"), true, true, false, "logging-client"},
		{metadataReq(12), true, false, false, "logging-client"},
		{produce, false, false, false, "logging-client"},
		{list, true, true, false, "logging-client"},
		{closeNone, true, true, false, "logging-client"},     // answered by the server, as CloseClientConnectionsAPI says
		{saslHandshake, true, true, false, "logging-client"}, // ILLEGAL_SASL_STATE: not a SASL listener
		{apiVersionsReq(0, "", ""), true, true, false, "logging-client"},
		{kmsg.NewPtrFindCoordinatorRequest(), false, false, true, "logging-client"}, // the handler closes
	}
	var reqBytes, respBytes []int
	for i, s := range steps {
		corr := int32(100 + i)
		f := formatter.AppendRequest(nil, s.req, corr)
		write(t, c, f)
		reqBytes = append(reqBytes, len(f)-4)
		switch {
		case s.response:
			respBytes = append(respBytes, len(readRawFrame(t, c))+4)
		case s.closed:
			requireClosed(t, c)
			respBytes = append(respBytes, 0)
		default:
			respBytes = append(respBytes, 0)
		}
	}

	got := logs.of(t, id, len(steps))
	require.Len(t, got, len(steps), "each request logged once")
	for i, s := range steps {
		l := got[i]
		name := kmsg.NameForKey(s.req.Key())
		assert.Equal(t, s.req.Key(), l.APIKey, "request %d", i)
		assert.Equal(t, s.req.GetVersion(), l.APIVersion, name)
		assert.Equal(t, int32(100+i), l.CorrelationID, name)
		assert.Equal(t, "test", l.ClientID, name)
		assert.Equal(t, reqBytes[i], l.RequestBytes, name)
		assert.Equal(t, respBytes[i], l.ResponseBytes, name)
		assert.Equal(t, s.server, l.ServerAnswered, name)
		assert.Equal(t, s.closed, l.Closed, name)
		assert.False(t, l.Authenticating, name) // a PLAINTEXT listener: no SASL exchange, its SaslHandshake refused as the authenticated connection's
		assert.Zero(t, l.Throttle, name)
		assert.Equal(t, id, l.Conn.ID, name)
		assert.Equal(t, "PLAINTEXT", string(l.Conn.Listener), name)
		assert.Equal(t, c.LocalAddr().String(), l.Conn.ClientAddr.String(), name)
		assert.Equal(t, connregistry.Anonymous(), l.Conn.Principal, name)
		assert.Equal(t, s.softwareIs, l.Conn.ClientSoftwareName, name)
		lat := l.Latency
		assert.Positive(t, lat.Total, name)
		assert.GreaterOrEqual(t, lat.Total, lat.Queue+lat.Handler+lat.ResponseQueue+lat.Send, name)
		if s.response {
			assert.Positive(t, lat.Send, name)
		} else {
			assert.Zero(t, lat.Send, name)
		}
		if s.server && l.APIKey != connregistry.DefaultListAPIKey && l.APIKey != connregistry.DefaultCloseAPIKey { // answered as inline APIs, and timed so
			assert.Zero(t, lat.Queue, name)
			assert.Zero(t, lat.ResponseQueue, name)
		}
	}
	assert.Positive(t, got[1].Latency.Queue+got[1].Latency.Handler, "the host's Metadata: queued and handled")

	// A second HookRequestDone, beside it, sees the same requests, the
	// closed one too, with the same phases: there is one
	// request-completion event.
	require.Eventually(t, func() bool { return len(done.of("done")) == len(steps) }, 10*time.Second, time.Millisecond)
	for _, d := range done.of("done") {
		if d.Key == 3 {
			assert.Equal(t, got[1].Latency, d.Latency, "both hooks get Metadata's time alike")
		}
	}
}

// kgo's requests are logged, the server's ApiVersions with the client
// software kgo announces and the host's Metadata after it, with kgo's
// client id.
func TestRequestLogKgo(t *testing.T) {
	logs := &requestLogs{}
	srv := socketservertest.NewServer(t, nil, withHooks(logs), echoMetadata)
	cl := newKgo(t, srv, "PLAINTEXT")
	require.NoError(t, kgoMetadata(cl))

	var av, md *socketserver.RequestDone
	require.Eventually(t, func() bool {
		for _, l := range logs.all() {
			switch l.APIKey {
			case 18:
				av = &l
			case 3:
				md = &l
			}
		}
		return av != nil && md != nil
	}, 10*time.Second, time.Millisecond)
	assert.True(t, av.ServerAnswered)
	assert.False(t, md.ServerAnswered)
	assert.Equal(t, "kgo", av.Conn.ClientSoftwareName)
	assert.NotEmpty(t, av.Conn.ClientSoftwareVersion)
	assert.Equal(t, "kgo", md.ClientID)
	assert.Equal(t, av.Conn.ID, md.Conn.ID, "one connection")
	assert.Positive(t, md.ResponseBytes)
	assert.Positive(t, md.Latency.Total)
}

// Pipelined requests (sent in one write, before any response is read) are
// logged once each, in the order they came, the server's and the host's
// interleaved; ApiVersions' client id, read from the connection's read
// buffer, is the hook's to keep.
func TestRequestLogPipelined(t *testing.T) {
	logs := &requestLogs{}
	srv := socketservertest.NewServer(t, nil, withHooks(logs), echoMetadata)
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	id := connID(t, srv, c)

	const n = 40
	var batch []byte
	for i := range n {
		var req kmsg.Request = metadataReq(12)
		if i%3 == 0 {
			req = apiVersionsReq(3, "pipe", "1")
		}
		cid := kmsg.NewRequestFormatter(kmsg.FormatterClientID("client-" + strconv.Itoa(i)))
		batch = append(batch, cid.AppendRequest(nil, req, int32(i))...) // AppendRequest writes the size at dst[0]
	}
	write(t, c, batch)
	for range n {
		readRawFrame(t, c)
	}
	got := logs.of(t, id, n)
	require.Len(t, got, n)
	for i, l := range got {
		assert.Equal(t, int32(i), l.CorrelationID, "logged in order")
		assert.Equal(t, "client-"+strconv.Itoa(i), l.ClientID)
		assert.Equal(t, i%3 == 0, l.ServerAnswered)
		assert.False(t, l.Closed)
	}
}

// A throttled request (Request.Throttle) is logged with its throttle time,
// answered with a response or with NoResponse (acks=0 Produce), when it is
// done: before the connection's mute ends.
func TestRequestLogThrottle(t *testing.T) {
	const throttle = 150 * time.Millisecond
	logs := &requestLogs{}
	srv := socketservertest.NewServer(t, nil, withHooks(logs), socketserver.HandlerFunc(func(r *socketserver.Request) {
		_ = r.Throttle(throttle)
		if r.APIKey == 0 {
			_ = r.NoResponse()
			return
		}
		_ = r.Respond(kmsg.NewPtrMetadataResponse())
	}))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	id := connID(t, srv, c)
	produce := kmsg.NewPtrProduceRequest()
	produce.Version, produce.Acks = 9, 0
	sent := time.Now()
	send(t, c, produce, 1)
	// The Produce is logged while its mute still runs.
	for len(logs.all()) == 0 {
		require.Less(t, time.Since(sent), throttle, "logged when answered, not when the mute ended")
		time.Sleep(time.Millisecond)
	}
	send(t, c, metadataReq(12), 2) // read after the Produce's throttle
	readResponse(t, c, kmsg.NewPtrMetadataResponse(), 2)

	got := logs.of(t, id, 2)
	for i, l := range got {
		assert.Equal(t, throttle, l.Throttle, "request %d", i)
		assert.False(t, l.Closed)
	}
	assert.Zero(t, got[0].ResponseBytes, "acks=0: no response")
	assert.Positive(t, got[1].ResponseBytes)
}

// A request whose connection closes while the host holds it is logged
// when the connection gives it up, with Closed set and no response: the
// host may have acted on it. The host's answer afterwards logs nothing
// more.
func TestRequestLogConnectionClosedBeforeTheAnswer(t *testing.T) {
	logs := &requestLogs{}
	held := make(chan *socketserver.Request, 1)
	srv := socketservertest.NewServer(t, nil, withHooks(logs), socketserver.HandlerFunc(func(r *socketserver.Request) { held <- r }))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	id := connID(t, srv, c)
	send(t, c, metadataReq(12), 7)
	r := recv(t, held)

	srv.Registry().Close(connregistry.Filter{}, connregistry.CloseByOperator)
	got := logs.of(t, id, 1)
	require.Len(t, got, 1)
	l := got[0]
	assert.True(t, l.Closed)
	assert.False(t, l.ServerAnswered)
	assert.Equal(t, int32(7), l.CorrelationID)
	assert.Zero(t, l.ResponseBytes)
	assert.Zero(t, l.Latency.Send)
	assert.Positive(t, l.Latency.Handler, "held by the host until the close")

	require.NoError(t, r.Respond(kmsg.NewPtrMetadataResponse()))
	requireConnCount(t, srv, "PLAINTEXT", 0)
	time.Sleep(20 * time.Millisecond) // a second log would come from the connection's goroutine, which has ended
	assert.Len(t, logs.all(), 1)
}

// The same, with nothing between the host's goroutine and the close to
// order them (the host does not hand the request over): under -race, the
// log's queue time, which a Serve worker records, must not race with the
// connection that logs the request as it closes.
func TestRequestLogConnectionClosedWhileAWorkerHolds(t *testing.T) {
	logs := &requestLogs{}
	release := make(chan struct{})
	defer close(release)
	srv := socketservertest.NewServer(t, nil, withHooks(logs), socketserver.HandlerFunc(func(r *socketserver.Request) {
		<-release
		_ = r.Respond(kmsg.NewPtrMetadataResponse())
	}))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	id := connID(t, srv, c)
	send(t, c, metadataReq(12), 7)
	time.Sleep(50 * time.Millisecond) // a worker has taken the request
	srv.Registry().Close(connregistry.Filter{}, connregistry.CloseByOperator)
	got := logs.of(t, id, 1)
	require.Len(t, got, 1)
	assert.True(t, got[0].Closed)
	assert.Positive(t, got[0].Latency.Handler, "held by a worker until the close")
}

// The requests of a SASL exchange are logged as the server answers them,
// on the way in (ApiVersions, SaslHandshake, SaslAuthenticate, which
// Kafka's request logger does not see) and after: with the anonymous
// principal until the exchange has ended, the principal being built once
// the last SaslAuthenticate has been answered, and Authenticating set; a
// failure's error response and a request the exchange does not allow with
// Closed set; raw tokens (SaslHandshake v0) not at all.
func TestRequestLogSASLExchange(t *testing.T) {
	logs := &requestLogs{}
	srv := socketservertest.NewServer(t, saslProps(config.Properties{"connection.failed.authentication.delay.ms": "0"}),
		func(c *socketserver.Config) {
			withUsers(newUsers(t))(c)
			c.Hooks = []socketserver.Hook{logs}
		}, echoMetadata)

	type want struct {
		key       int16
		principal string
		response  bool
		closed    bool
		server    bool
	}
	for _, tc := range []struct {
		name string
		run  func(rc *rawClient)
		want []want
	}{
		{"SCRAM-SHA-256 over SaslAuthenticate", func(rc *rawClient) {
			rc.roundTrip(apiVersionsReq(3, "sasl-client", "1"))
			require.Zero(t, rc.login("SCRAM-SHA-256", "alice", alicePassword, 2).ErrorCode)
			rc.roundTrip(metadataReq(12))
		}, []want{
			{18, "User:ANONYMOUS", true, false, true},
			{17, "User:ANONYMOUS", true, false, true},
			{36, "User:ANONYMOUS", true, false, true}, // client-first: the server-first challenge
			{36, "User:ANONYMOUS", true, false, true}, // client-final: authenticated, the principal built after it
			{3, "User:alice", true, false, false},
		}},
		{"PLAIN with raw tokens", func(rc *rawClient) {
			require.Zero(t, rc.handshake(0, "PLAIN").ErrorCode)
			rc.rawExchange(newSASLClient(t, "PLAIN", "alice", alicePassword))
			rc.roundTrip(metadataReq(12))
		}, []want{
			{17, "User:ANONYMOUS", true, false, true},
			{3, "User:alice", true, false, false},
		}},
		{"a wrong password", func(rc *rawClient) {
			require.Equal(t, int16(58), rc.login("PLAIN", "alice", "wrong-password", 1).ErrorCode)
			requireClosedNoResponse(t, rc.c)
		}, []want{
			{17, "User:ANONYMOUS", true, false, true},
			{36, "User:ANONYMOUS", true, true, true}, // the error response, then the close
		}},
		{"Metadata before authentication", func(rc *rawClient) {
			rc.send(metadataReq(12))
			requireClosedNoResponse(t, rc.c)
		}, []want{
			{3, "User:ANONYMOUS", false, true, true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := dialRaw(t, srv, "SASL_PLAINTEXT")
			id := connID(t, srv, rc.c)
			tc.run(rc)
			got := logs.of(t, id, len(tc.want))
			require.Len(t, got, len(tc.want))
			for i, w := range tc.want {
				l := got[i]
				assert.Equal(t, w.key, l.APIKey, "request %d", i)
				assert.Equal(t, w.principal, l.Conn.Principal.String(), "request %d", i)
				assert.Equal(t, w.response, l.ResponseBytes > 0, "request %d", i)
				assert.Equal(t, w.closed, l.Closed, "request %d", i)
				assert.Equal(t, w.server, l.ServerAnswered, "request %d", i)
				assert.Equal(t, w.server, l.Authenticating, "request %d: the server answers the exchange's requests, and only those here", i)
				assert.Equal(t, int32(i+1), l.CorrelationID, "request %d", i)
			}
		})
	}
}

// SlogRequestLog logs each request at debug level with the RequestDone's
// attributes, and nothing to a logger above debug level.
func TestSlogRequestLog(t *testing.T) {
	capture, logger := newLogCapture()
	quiet := &countingHandler{level: slog.LevelInfo}
	srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) {
		withAPIs(c)
		// quiet first: hooks are called in order, so once the capture has
		// the record, quiet has been asked.
		c.Hooks = []socketserver.Hook{socketserver.SlogRequestLog(slog.New(quiet)), socketserver.SlogRequestLog(logger)}
	}, echoMetadata)
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	id := connID(t, srv, c)
	f := formatter.AppendRequest(nil, metadataReq(12), 42)
	write(t, c, f)
	resp := readRawFrame(t, c)

	var rec capturedRecord
	require.Eventually(t, func() bool {
		for _, r := range capture.Records() {
			if r.msg == "request" {
				rec = r
				return true
			}
		}
		return false
	}, 10*time.Second, time.Millisecond)
	assert.Equal(t, slog.LevelDebug, rec.level)
	for k, v := range map[string]string{
		"conn_id":           id,
		"listener":          "PLAINTEXT",
		"security_protocol": "PLAINTEXT",
		"server_name":       "", // no TLS
		"principal":         "User:ANONYMOUS",
		"client_address":    c.LocalAddr().String(),
		"client_id":         "test",
		"api_key":           "3",
		"api_name":          "METADATA",
		"api_version":       "12",
		"correlation_id":    "42",
		"request_bytes":     strconv.Itoa(len(f) - 4),
		"response_bytes":    strconv.Itoa(len(resp) + 4),
		"throttle":          "0s",
		"server_answered":   "false",
		"closed":            "false",
	} {
		assert.Equal(t, v, rec.attrs[k], k)
	}
	for _, k := range []string{"queue", "handler", "response_queue", "send", "total"} {
		d, err := time.ParseDuration(rec.attrs[k])
		require.NoError(t, err, k)
		assert.GreaterOrEqual(t, d, time.Duration(0), k)
	}
	assert.Contains(t, rec.attrs, "client_software_name")
	assert.Contains(t, rec.attrs, "server_name")
	assert.Zero(t, quiet.handled(), "a logger above debug level logs nothing")
	assert.Positive(t, quiet.asked(), "and was asked")
}

// countingHandler is a slog handler at level that counts what it is asked
// and what it handles.
type countingHandler struct {
	level   slog.Level
	mu      sync.Mutex
	enabled int
	records int
}

func (h *countingHandler) Enabled(_ context.Context, l slog.Level) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.enabled++
	return l >= h.level
}

func (h *countingHandler) Handle(context.Context, slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records++
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }
func (h *countingHandler) asked() int                         { h.mu.Lock(); defer h.mu.Unlock(); return h.enabled }
func (h *countingHandler) handled() int                       { h.mu.Lock(); defer h.mu.Unlock(); return h.records }
