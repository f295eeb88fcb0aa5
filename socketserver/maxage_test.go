package socketserver_test

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// withMaxAge sets Config.ConnectionsMaxAge, without jitter, and every API.
func withMaxAge(age time.Duration, parkAfter time.Duration) func(*socketserver.Config) {
	return func(c *socketserver.Config) {
		c.APIs = allAPIs()
		c.ConnectionsMaxAge = age
		c.ConnectionsMaxAgeJitter = -1
		c.ParkAfter = parkAfter
	}
}

// closedFor returns the connections closed with reason.
func closedFor(srv *socketserver.Server, reason connregistry.CloseReason) []connregistry.Conn {
	var out []connregistry.Conn
	for _, c := range srv.Registry().Closed(connregistry.Filter{}) {
		if c.CloseReason == reason {
			out = append(out, c)
		}
	}
	return out
}

// A connection that waits for a request, parked or not, is closed once it
// has reached its maximum age, with the reason max-age, and not before.
func TestMaxAgeClosesWaitingConnection(t *testing.T) {
	const age = 400 * time.Millisecond
	for _, tc := range []struct {
		name string
		park time.Duration
	}{
		{"waiting", -1},
		{"parked", 20 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := socketservertest.NewServer(t, nil, withMaxAge(age, tc.park), echoMetadata)
			start := time.Now()
			c := socketservertest.Dial(t, srv, "PLAINTEXT")
			versionsRoundTrip(t, c, 1)
			if tc.park > 0 {
				waitParked(t, srv, 1)
			}
			requireClosedNoResponse(t, c)
			took := time.Since(start)
			assert.GreaterOrEqual(t, took, age, "closed before its age")
			assert.Less(t, took, age+2*time.Second, "not closed at its age")
			require.Eventually(t, func() bool { return len(closedFor(srv, connregistry.CloseMaxAge)) == 1 }, 10*time.Second, 10*time.Millisecond)
			requireQuotasReleased(t, srv)
		})
	}
}

// A connection whose client keeps a request in flight at every moment
// (it sends the next before it reads the answer to the last) is closed
// after its age all the same: each request it read is answered, in order,
// and then it reads no more; the requests it did not read get no answer
// and are never seen by the host: nothing it accepted is lost.
func TestMaxAgeBusyConnection(t *testing.T) {
	const age = 300 * time.Millisecond
	seen := make(chan int32, 100000)
	srv := socketservertest.NewServer(t, nil, withMaxAge(age, -1), socketserver.HandlerFunc(func(r *socketserver.Request) {
		seen <- r.CorrelationID
		_ = respondEmpty(r)
	}))
	start := time.Now()
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	var (
		sent     int32
		answered []int32
	)
	write := func() bool {
		sent++
		_, err := c.Write(formatter.AppendRequest(nil, metadataReq(1), sent))
		return err == nil
	}
	require.True(t, write())
	require.True(t, write())
	for {
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			require.True(t, errors.Is(err, io.EOF) || isReset(err), "%v", err)
			break
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		_, err := io.ReadFull(c, frame)
		require.NoError(t, err)
		answered = append(answered, int32(binary.BigEndian.Uint32(frame)))
		write() // may fail once the server has closed
	}
	took := time.Since(start)
	assert.GreaterOrEqual(t, took, age-10*time.Millisecond, "closed before its age") // the server's clock started after the dial's
	assert.Less(t, took, age+5*time.Second)
	require.Greater(t, len(answered), 2, "the connection served too little to show anything")
	for i, corr := range answered {
		require.Equal(t, int32(i+1), corr, "answers out of order or missing")
	}
	close(seen)
	var handled []int32
	for corr := range seen {
		handled = append(handled, corr)
	}
	assert.Equal(t, answered, handled, "a request the host answered got no answer on the wire, or one was answered that the host never saw")
	assert.Less(t, len(answered), int(sent), "every request answered: the test never caught one unread")
	require.Eventually(t, func() bool { return len(closedFor(srv, connregistry.CloseMaxAge)) == 1 }, 10*time.Second, 10*time.Millisecond)
}

// A connection whose requests are all in its socket at once, so that it
// never waits for one, is closed at its age all the same: the request that
// finds it past its age is the last it reads; every request it read is
// answered, in order, before the close, which the client sees as an end
// of stream (the server's write side closed first, the unread requests
// drained), not a reset. Only the server's own check of the age after a
// request it read closes it: the connection is never idle, and never
// waits for a request, for the processor's scans to find it.
func TestMaxAgeBusyConnectionNoGap(t *testing.T) {
	const (
		age = 200 * time.Millisecond
		n   = 200 // 5 ms each: a second's work, well past the age
	)
	var handled atomic.Int32
	srv := socketservertest.NewServer(t, nil, withMaxAge(age, -1), socketserver.HandlerFunc(func(r *socketserver.Request) {
		time.Sleep(5 * time.Millisecond)
		handled.Add(1)
		_ = respondEmpty(r)
	}))
	start := time.Now()
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	var frames []byte
	for corr := int32(1); corr <= n; corr++ {
		frames = append(frames, formatter.AppendRequest(nil, metadataReq(1), corr)...)
	}
	_, err := c.Write(frames)
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second)))
	var answered []int32
	for {
		var size [4]byte
		if _, err = io.ReadFull(c, size[:]); err != nil {
			break
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		_, err = io.ReadFull(c, frame)
		require.NoError(t, err, "an answer cut short")
		answered = append(answered, int32(binary.BigEndian.Uint32(frame)))
	}
	require.ErrorIs(t, err, io.EOF, "the close was not an end of stream after the answers")
	took := time.Since(start)
	assert.GreaterOrEqual(t, took, age-10*time.Millisecond, "closed before its age") // the server's clock started after the dial's
	require.NotEmpty(t, answered)
	assert.Less(t, len(answered), n, "every request answered: the connection was not closed at its age")
	for i, corr := range answered {
		require.Equal(t, int32(i+1), corr, "answers out of order or missing")
	}
	require.Eventually(t, func() bool { return len(closedFor(srv, connregistry.CloseMaxAge)) == 1 }, 10*time.Second, 10*time.Millisecond,
		"closed: %+v", srv.Registry().Closed(connregistry.Filter{}))
	assert.EqualValues(t, len(answered), handled.Load(), "a request the host answered got no answer on the wire")
	t.Logf("%d of %d answered in %v", len(answered), n, took)
}

// A connection whose host holds pipelined requests (API.Pipeline) while
// its age passes, with more requests in its socket than the pipeline
// admits, is closed at its age as a busy one is: the request it reads
// after its age is the last it hands on; every request the host got is
// answered, in order, the answers given after the age included, before
// the client sees the end of stream (the server lingers: the requests it
// did not read are drained, not answered with a reset); the host never
// sees those.
func TestMaxAgeKeepsPipelinedAnswers(t *testing.T) {
	const age = 500 * time.Millisecond
	srv, c, h := servePipelined(t, config.Properties{
		config.KeyConnectionsMaxAgeMs: strconv.Itoa(int(age / time.Millisecond)), config.KeyConnectionsMaxAgeJitter: "0",
	}, 5)
	start := time.Now()
	f := kmsg.NewPtrFetchRequest()
	f.Version = 4
	var frames []byte
	for corr := range int32(8) { // 5 held, the 6th waits for room, the 7th is read after the age, the 8th never
		frames = append(frames, formatter.AppendRequest(nil, f, corr)...)
	}
	write(t, c, frames)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second)))
	held := h.wait(t, 5)
	time.Sleep(time.Until(start.Add(age + 100*time.Millisecond))) // the host holds them past the age
	for i := len(held) - 1; i >= 0; i-- {                         // answered newest first: they leave oldest first
		require.NoError(t, held[i].RespondRaw(rawResponseOf(held[i].APIKey, held[i].CorrelationID)))
	}
	for corr := range int32(5) {
		require.Equal(t, rawResponseOf(1, corr), readRawResponse(t, c, corr, false))
	}
	held = h.wait(t, 7)
	time.Sleep(50 * time.Millisecond) // the connection has stopped reading, and waits for these answers
	for _, r := range held[5:] {
		require.NoError(t, r.RespondRaw(rawResponseOf(r.APIKey, r.CorrelationID)))
	}
	for corr := int32(5); corr < 7; corr++ {
		require.Equal(t, rawResponseOf(1, corr), readRawResponse(t, c, corr, false), "an answer given after the age")
	}
	_, err := c.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "no end of stream after the answers")
	require.Eventually(t, func() bool { return len(closedFor(srv, connregistry.CloseMaxAge)) == 1 }, 10*time.Second, 10*time.Millisecond,
		"closed: %+v", srv.Registry().Closed(connregistry.Filter{}))
	assert.Len(t, h.wait(t, 7), 7, "the host got a request read after the one that found the connection past its age")
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}

// The jitter spreads connections' ages: with ±50% of 1 s, connections made
// together close over a spread of times, within [0.5 s, 1.5 s] and not
// all at once.
func TestMaxAgeJitter(t *testing.T) {
	srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) {
		c.APIs = allAPIs()
		c.ConnectionsMaxAge = time.Second
		c.ConnectionsMaxAgeJitter = 0.5
	}, echoMetadata)
	start := time.Now()
	const n = 8
	for range n {
		versionsRoundTrip(t, socketservertest.Dial(t, srv, "PLAINTEXT"), 1)
	}
	var closed []connregistry.Conn
	require.Eventually(t, func() bool {
		closed = closedFor(srv, connregistry.CloseMaxAge)
		return len(closed) == n
	}, 10*time.Second, 10*time.Millisecond)
	first, last := closed[0].ClosedAt, closed[0].ClosedAt
	for _, c := range closed {
		assert.GreaterOrEqual(t, c.ClosedAt.Sub(start), 450*time.Millisecond)
		assert.Less(t, c.ClosedAt.Sub(c.ConnectedAt), 1500*time.Millisecond+time.Second)
		if c.ClosedAt.Before(first) {
			first = c.ClosedAt
		}
		if c.ClosedAt.After(last) {
			last = c.ClosedAt
		}
	}
	assert.Greater(t, last.Sub(first), 100*time.Millisecond, "the connections all left at once")
}

// A listener's own maximum age (listener.name.<l>.kafkanet.connections.max.age.ms)
// replaces the server's on that listener: one with its own age closes its
// connections at it while another listener's, with none (the server has
// none), stay; one with -1 keeps its connections though the server has an
// age, which closes the other listener's.
func TestMaxAgePerListener(t *testing.T) {
	const age = 300 * time.Millisecond
	for _, tc := range []struct {
		name        string
		props       config.Properties
		aged, stays protocolmap.ListenerName
	}{
		{"own age, the server none", config.Properties{
			"listener.name.fast." + config.KeyConnectionsMaxAgeMs: "300",
		}, "FAST", "PLAINTEXT"},
		{"-1, the server an age", config.Properties{
			config.KeyConnectionsMaxAgeMs:                         "300",
			"listener.name.fast." + config.KeyConnectionsMaxAgeMs: "-1",
		}, "PLAINTEXT", "FAST"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := socketservertest.NewServer(t, merge(config.Properties{
				"listeners":                       "PLAINTEXT://127.0.0.1:0,FAST://127.0.0.1:0",
				"listener.security.protocol.map":  "PLAINTEXT:PLAINTEXT,FAST:PLAINTEXT",
				"inter.broker.listener.name":      "PLAINTEXT",
				config.KeyConnectionsMaxAgeJitter: "0",
			}, tc.props), withAPIs, echoMetadata)
			start := time.Now()
			aged := socketservertest.Dial(t, srv, tc.aged)
			stays := socketservertest.Dial(t, srv, tc.stays)
			versionsRoundTrip(t, aged, 1)
			versionsRoundTrip(t, stays, 1)
			requireClosedNoResponse(t, aged)
			assert.GreaterOrEqual(t, time.Since(start), age, "closed before its age")
			time.Sleep(time.Until(start.Add(3 * age))) // the other listener's connection outlives the age
			versionsRoundTrip(t, stays, 2)
			closed := closedFor(srv, connregistry.CloseMaxAge)
			require.Len(t, closed, 1)
			assert.Equal(t, tc.aged, closed[0].Listener)
		})
	}
}

// The keys, as config.Server reads them.
func TestMaxAgeConfig(t *testing.T) {
	base := config.Properties{"listeners": "PLAINTEXT://127.0.0.1:0"}
	cfg, err := config.Server(merge(base, config.Properties{
		config.KeyConnectionsMaxAgeMs: "2000", config.KeyConnectionsMaxAgeJitter: "0.25",
	}))
	require.NoError(t, err)
	assert.Equal(t, 2*time.Second, cfg.ConnectionsMaxAge)
	assert.InDelta(t, 0.25, cfg.ConnectionsMaxAgeJitter, 1e-9)
	cfg, err = config.Server(base)
	require.NoError(t, err)
	assert.Negative(t, cfg.ConnectionsMaxAge, "off by default")
	assert.InDelta(t, socketserver.DefaultConnectionsMaxAgeJitter, cfg.ConnectionsMaxAgeJitter, 1e-9)
	cfg, err = config.Server(merge(base, config.Properties{config.KeyConnectionsMaxAgeMs: "-1"}))
	require.NoError(t, err)
	assert.Negative(t, cfg.ConnectionsMaxAge, "-1 is off")
	cfg, err = config.Server(merge(base, config.Properties{config.KeyConnectionsMaxAgeJitter: "0"}))
	require.NoError(t, err)
	assert.Negative(t, cfg.ConnectionsMaxAgeJitter, "a jitter of 0 is none, not the default")
	// refused requires config.Server to refuse each of cases over base,
	// naming its key and value.
	refused := func(base config.Properties, cases ...config.Properties) {
		t.Helper()
		for _, props := range cases {
			_, err := config.Server(merge(base, props))
			var ce *config.Error
			require.ErrorAs(t, err, &ce, "%v", props)
			for k, v := range props {
				assert.Equal(t, k, ce.Key)
				assert.Equal(t, v, ce.Value)
			}
		}
	}
	refused(base,
		config.Properties{config.KeyConnectionsMaxAgeMs: "soon"},
		config.Properties{config.KeyConnectionsMaxAgeMs: "0"}, // neither the default nor off: refused
		config.Properties{config.KeyConnectionsMaxAgeMs: "-2"},
		config.Properties{config.KeyConnectionsMaxAgeJitter: "1"},
		config.Properties{config.KeyConnectionsMaxAgeJitter: "-0.1"},
		config.Properties{config.KeyConnectionsMaxAgeJitter: "NaN"},
	)
	ls, err := config.Listeners(base)
	require.NoError(t, err)
	_, err = socketserver.New(socketserver.Config{Listeners: ls, ConnectionsMaxAge: time.Second, ConnectionsMaxAgeJitter: 1})
	assert.Error(t, err)
	_, err = socketserver.New(socketserver.Config{Listeners: ls, PerListener: map[protocolmap.ListenerName]*socketserver.ListenerConfig{
		"PLAINTEXT": {ConnectionsMaxAge: time.Second, ConnectionsMaxAgeJitter: 1},
	}})
	assert.ErrorContains(t, err, "listener PLAINTEXT")

	// Per listener: each key read into the listener's ListenerConfig,
	// unset there 0 (the server's), -1 and a jitter of 0 none; errors name
	// the prefixed key.
	two := merge(base, config.Properties{
		"listeners":                      "PLAINTEXT://127.0.0.1:0,FAST://127.0.0.1:0,SLOW://127.0.0.1:0",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,FAST:PLAINTEXT,SLOW:PLAINTEXT",
		"inter.broker.listener.name":     "PLAINTEXT",
	})
	cfg, err = config.Server(merge(two, config.Properties{
		config.KeyConnectionsMaxAgeMs:                             "60000",
		"listener.name.fast." + config.KeyConnectionsMaxAgeMs:     "2000",
		"listener.name.fast." + config.KeyConnectionsMaxAgeJitter: "0.3",
		"listener.name.slow." + config.KeyConnectionsMaxAgeMs:     "-1",
		"listener.name.slow." + config.KeyConnectionsMaxAgeJitter: "0",
	}))
	require.NoError(t, err)
	assert.Equal(t, time.Minute, cfg.ConnectionsMaxAge)
	assert.Zero(t, cfg.PerListener["PLAINTEXT"].ConnectionsMaxAge, "unset: the server's")
	assert.Zero(t, cfg.PerListener["PLAINTEXT"].ConnectionsMaxAgeJitter, "unset: the server's")
	assert.Equal(t, 2*time.Second, cfg.PerListener["FAST"].ConnectionsMaxAge)
	assert.InDelta(t, 0.3, cfg.PerListener["FAST"].ConnectionsMaxAgeJitter, 1e-9)
	assert.Negative(t, cfg.PerListener["SLOW"].ConnectionsMaxAge, "-1: none on the listener")
	assert.Negative(t, cfg.PerListener["SLOW"].ConnectionsMaxAgeJitter, "0: no jitter on the listener")
	refused(two,
		config.Properties{"listener.name.fast." + config.KeyConnectionsMaxAgeMs: "0"},
		config.Properties{"listener.name.fast." + config.KeyConnectionsMaxAgeMs: "soon"},
		config.Properties{"listener.name.fast." + config.KeyConnectionsMaxAgeJitter: "1"},
	)
}
