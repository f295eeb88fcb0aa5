package socketserver_test

import (
	"math/rand/v2"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// Requests pipelined in one write are handed over one at a time per
// connection and answered in order, even when the host answers them from
// other goroutines after random delays.
func TestPipelinedRequestsOneInFlightInOrder(t *testing.T) {
	const conns, perConn = 3, 20
	var (
		mu       sync.Mutex
		inFlight = map[string]int{}
		order    = map[string][]int32{}
		overlaps atomic.Int32
	)
	var answering sync.WaitGroup
	defer answering.Wait()
	h := socketserver.HandlerFunc(func(r *socketserver.Request) {
		mu.Lock()
		inFlight[r.Conn.ID]++
		if inFlight[r.Conn.ID] > 1 {
			overlaps.Add(1)
		}
		order[r.Conn.ID] = append(order[r.Conn.ID], r.CorrelationID)
		mu.Unlock()
		delay := time.Duration(rand.IntN(3000)) * time.Microsecond
		answering.Go(func() {
			time.Sleep(delay) // the host's own work, not synchronisation
			mu.Lock()
			inFlight[r.Conn.ID]--
			mu.Unlock()
			resp := kmsg.NewPtrMetadataResponse()
			resp.ClusterID = kmsg.StringPtr(r.Conn.ID)
			resp.ControllerID = r.CorrelationID
			assert.NoError(t, r.Respond(resp))
		})
	})
	srv := socketservertest.NewServer(t, nil, withAPIs, h)

	var clients sync.WaitGroup
	for range conns {
		c := socketservertest.Dial(t, srv, "PLAINTEXT")
		clients.Go(func() {
			var batch []byte
			for i := range int32(perConn) {
				batch = append(batch, formatter.AppendRequest(nil, metadataReq(9), 1000+i)...) // AppendRequest writes the size at dst[0]
			}
			if _, err := c.Write(batch); !assert.NoError(t, err) {
				return
			}
			var connID string
			for i := range int32(perConn) {
				resp := kmsg.NewPtrMetadataResponse()
				resp.Version = 9
				readResponse(t, c, resp, 1000+i)
				assert.Equal(t, 1000+i, resp.ControllerID)
				if i == 0 {
					connID = *resp.ClusterID
				}
				assert.Equal(t, connID, *resp.ClusterID, "a response of another connection")
			}
		})
	}
	clients.Wait()

	assert.Zero(t, overlaps.Load(), "the handler held two requests of one connection at once")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, order, conns)
	want := make([]int32, perConn)
	for i := range want {
		want[i] = 1000 + int32(i)
	}
	for id, got := range order {
		assert.Equal(t, want, got, "handler order on %s", id)
	}
}

// The host may answer from any goroutine, later.
func TestRespondAsync(t *testing.T) {
	seen := make(chan *socketserver.Request, 1)
	srv := socketservertest.NewServer(t, nil, withAPIs, queueHandler(seen))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	start := time.Now()
	send(t, c, metadataReq(1), 5)
	r := recv(t, seen)
	answered := make(chan error, 1)
	time.AfterFunc(100*time.Millisecond, func() { answered <- respondEmpty(r) })
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 1
	readResponse(t, c, resp, 5)
	assert.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond)
	require.NoError(t, <-answered)
}

// Each request is answered once: a second Respond, NoResponse or
// CloseConnection returns ErrAlreadyAnswered and writes nothing.
func TestAnswerTwice(t *testing.T) {
	for _, tc := range []struct {
		name   string
		first  func(*socketserver.Request) error
		reply  bool
		closes bool
	}{
		{"Respond", respondEmpty, true, false},
		{"NoResponse", (*socketserver.Request).NoResponse, false, false},
		{"CloseConnection", (*socketserver.Request).CloseConnection, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := make(chan *socketserver.Request, 1)
			srv := socketservertest.NewServer(t, nil, withAPIs, queueHandler(seen))
			c := socketservertest.Dial(t, srv, "PLAINTEXT")
			send(t, c, metadataReq(1), 1)
			r := recv(t, seen)
			require.NoError(t, tc.first(r))
			require.ErrorIs(t, respondEmpty(r), socketserver.ErrAlreadyAnswered)
			require.ErrorIs(t, r.NoResponse(), socketserver.ErrAlreadyAnswered)
			require.ErrorIs(t, r.CloseConnection(), socketserver.ErrAlreadyAnswered)
			if tc.closes {
				requireClosedNoResponse(t, c)
				return
			}
			if tc.reply {
				resp := kmsg.NewPtrMetadataResponse()
				resp.Version = 1
				readResponse(t, c, resp, 1)
			}
			// The next response is the next request's: nothing stray was written.
			send(t, c, metadataReq(1), 2)
			r = recv(t, seen)
			require.NoError(t, respondEmpty(r))
			resp := kmsg.NewPtrMetadataResponse()
			resp.Version = 1
			readResponse(t, c, resp, 2)
		})
	}
}

// A response of another API is refused and leaves the request unanswered.
func TestRespondWrongKey(t *testing.T) {
	seen := make(chan *socketserver.Request, 1)
	srv := socketservertest.NewServer(t, nil, withAPIs, queueHandler(seen))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	send(t, c, metadataReq(7), 31)
	r := recv(t, seen)
	require.Error(t, r.Respond(kmsg.NewPtrApiVersionsResponse()))
	require.Error(t, r.Respond(kmsg.NewPtrProduceResponse()))
	require.Error(t, r.Respond(nil))
	requireOpen(t, c, 50*time.Millisecond)
	resp := kmsg.NewPtrMetadataResponse()
	resp.ControllerID = 4
	require.NoError(t, r.Respond(resp))
	got := kmsg.NewPtrMetadataResponse()
	got.Version = 7
	readResponse(t, c, got, 31)
	assert.Equal(t, int32(4), got.ControllerID)
}

// NoResponse writes nothing and lets the next request be read.
func TestNoResponse(t *testing.T) {
	seen := make(chan *socketserver.Request, 2)
	srv := socketservertest.NewServer(t, nil, withAPIs, queueHandler(seen))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	send(t, c, metadataReq(1), 1)
	send(t, c, metadataReq(1), 2)
	r := recv(t, seen)
	require.Equal(t, int32(1), r.CorrelationID)
	require.Empty(t, seen, "the second request was read before the first was answered")
	require.NoError(t, r.NoResponse())
	r = recv(t, seen)
	require.Equal(t, int32(2), r.CorrelationID)
	require.NoError(t, respondEmpty(r))
	// The first frame on the wire answers correlation id 2.
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 1
	readResponse(t, c, resp, 2)
}

// CloseConnection closes the connection without a response and leaves the
// others alone.
func TestCloseConnection(t *testing.T) {
	seen := make(chan *socketserver.Request, 1)
	srv := socketservertest.NewServer(t, nil, withAPIs, queueHandler(seen))
	other := socketservertest.Dial(t, srv, "PLAINTEXT")
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	send(t, c, metadataReq(1), 1)
	r := recv(t, seen)
	require.NoError(t, r.CloseConnection())
	requireClosedNoResponse(t, c)
	select {
	case <-r.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the request's context was not cancelled when its connection closed")
	}

	send(t, other, metadataReq(1), 2)
	r = recv(t, seen)
	require.NoError(t, respondEmpty(r))
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 1
	readResponse(t, other, resp, 2)
}

// A request's context is cancelled when its client disconnects while the
// host holds the request, so that the host can stop working for it.
func TestRequestContextCancelledOnClientDisconnect(t *testing.T) {
	seen := make(chan *socketserver.Request, 1)
	srv := socketservertest.NewServer(t, nil, withAPIs, queueHandler(seen))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	send(t, c, metadataReq(1), 1)
	r := recv(t, seen)
	select {
	case <-r.Context().Done():
		t.Fatal("context cancelled while the client is connected")
	default:
	}
	require.NoError(t, c.Close())
	select {
	case <-r.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the request's context was not cancelled when the client went away")
	}
	require.NoError(t, respondEmpty(r), "answering a request of a gone client")
	requireConnCount(t, srv, "PLAINTEXT", 0)
}

// The peer watcher, the connection's second goroutine, starts only for a
// request the host holds longer than a moment: requests answered at once
// cost no second goroutine's wake-ups, while a held one still has its
// context cancelled when the client goes.
// peerWatchers counts the goroutines of peer watchers in this process
// (runtime.NumGoroutine would count those of other tests' servers that are
// still winding down).
func peerWatchers() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "(*conn).watchPeer.func1(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

func TestPeerWatchedOnlyWhileARequestIsHeld(t *testing.T) {
	hold := make(chan time.Duration, 1)
	release := make(chan struct{}) // ends a hold of untilReleased
	const untilReleased = -2
	canceled := make(chan struct{}, 1)
	srv := socketservertest.NewServer(t, config.Properties{"num.io.threads": "1"}, withAPIs,
		socketserver.HandlerFunc(func(r *socketserver.Request) {
			switch d := <-hold; d {
			case -1: // held until the client goes
				<-r.Context().Done()
				canceled <- struct{}{}
				_ = r.CloseConnection()
				return
			case untilReleased:
				<-release
			default:
				time.Sleep(d)
			}
			_ = respondEmpty(r)
		}))
	// A request answered at once starts no watcher. peerWatchAfter is a
	// millisecond, which a loaded machine can stall a goroutine for: a
	// connection that saw a watcher start is tried again, three at most.
	var c net.Conn
	var base int
	for attempt := 1; ; attempt++ {
		c = socketservertest.Dial(t, srv, "PLAINTEXT")
		hold <- 0
		metadataRoundTrip(t, c, 9, 0)
		base = peerWatchers()
		for i := range int32(50) {
			hold <- 0
			metadataRoundTrip(t, c, 9, 1+i)
		}
		if got := peerWatchers(); got <= base || attempt == 3 {
			assert.LessOrEqual(t, got, base, "no peer watcher for requests answered at once (%d connections tried)", attempt)
			break
		}
		// c stays open, its watcher with it, so that the counts hold still.
	}
	base = peerWatchers()

	// A request held until its watcher is seen: held for a fixed time, a
	// loaded machine could deliver the answer and the watcher's timer to
	// the connection at once, and it may take the answer first.
	hold <- untilReleased
	send(t, c, metadataReq(9), 100)
	assert.Eventually(t, func() bool { return peerWatchers() == base+1 }, 10*time.Second, time.Millisecond,
		"a held request started the peer watcher")
	close(release)
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 9
	readResponse(t, c, resp, 100)
	assert.Equal(t, base+1, peerWatchers(), "the watcher stays for the connection's next request")

	d := socketservertest.Dial(t, srv, "PLAINTEXT")
	hold <- -1
	send(t, d, metadataReq(9), 1)
	time.Sleep(20 * time.Millisecond) // held past peerWatchAfter: watched
	require.NoError(t, d.Close())
	select {
	case <-canceled:
	case <-time.After(10 * time.Second):
		t.Fatal("the held request's context was not cancelled when its client went")
	}
}
