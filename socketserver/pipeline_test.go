package socketserver_test

import (
	"bytes"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
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

// pipelinedAPIs are Produce (streamed above 4 KiB) and Fetch served raw
// with a pipeline of depth, and Metadata decoded, one at a time.
func pipelinedAPIs(depth int) []socketserver.API {
	return append(socketserver.Raw(
		socketserver.API{Key: 0, MinVersion: 3, MaxVersion: 12, StreamAbove: 4096, Pipeline: depth},
		socketserver.API{Key: 1, MinVersion: 4, MaxVersion: 17, Pipeline: depth},
	), socketserver.KmsgAPI(kmsg.Metadata, 0, 12))
}

// held collects the requests a host holds, for a test to answer.
type held struct {
	mu   sync.Mutex
	reqs []*socketserver.Request
	got  chan struct{}
}

func newHeld() *held { return &held{got: make(chan struct{}, 1024)} }

func (h *held) add(r *socketserver.Request) {
	h.mu.Lock()
	h.reqs = append(h.reqs, r)
	h.mu.Unlock()
	h.got <- struct{}{}
}

// wait waits until n requests are held, and returns them.
func (h *held) wait(t testing.TB, n int) []*socketserver.Request {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		h.mu.Lock()
		if len(h.reqs) >= n {
			out := append([]*socketserver.Request(nil), h.reqs...)
			h.mu.Unlock()
			// Serve's workers take the requests: in any order.
			slices.SortFunc(out, func(a, b *socketserver.Request) int { return int(a.CorrelationID - b.CorrelationID) })
			return out
		}
		h.mu.Unlock()
		select {
		case <-h.got:
		case <-deadline:
			t.Fatalf("%d requests held, want %d", len(h.reqs), n)
		}
	}
}

// count is how many requests are held.
func (h *held) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.reqs)
}

// servePipelined starts a server whose host holds every request (held),
// with pipelinedAPIs(depth) and hooks, and dials its PLAINTEXT listener.
func servePipelined(t *testing.T, props config.Properties, depth int, hooks ...socketserver.Hook) (*socketserver.Server, net.Conn, *held) {
	h := newHeld()
	srv := socketservertest.NewServer(t, props, func(c *socketserver.Config) {
		c.APIs = pipelinedAPIs(depth)
		c.Hooks = hooks
	}, socketserver.HandlerFunc(h.add))
	return srv, socketservertest.Dial(t, srv, "PLAINTEXT"), h
}

// produceFrames is n Produce requests of size bytes of records, with
// correlation ids 0 to n-1, to be written at once.
func produceFrames(n, size int) []byte {
	var all []byte
	for i := range n {
		all = append(all, formatter.AppendRequest(nil, produceOf(size), int32(i))...)
	}
	return all
}

// A client's pipelined requests of APIs that pipeline reach the host
// before the earlier ones are answered, up to the pipeline's depth, with
// a streamed body read in between; answers given in any order of time
// leave in the order of the requests; a Metadata request, which does not
// pipeline, reaches the host only once every earlier request has been
// answered; and every request's memory goes back to the budget.
func TestPipelineAnswersInOrder(t *testing.T) {
	for _, depth := range []int{1, 2, 5} {
		t.Run("Pipeline="+strconv.Itoa(depth), func(t *testing.T) {
			var inFlight, most atomic.Int32
			var answering sync.WaitGroup
			defer answering.Wait()
			srv := socketservertest.NewServer(t, streamProps, func(c *socketserver.Config) { c.APIs = pipelinedAPIs(depth) },
				socketserver.HandlerFunc(func(r *socketserver.Request) {
					if r.Raw == nil { // Metadata: nothing pipelined is held
						assert.Zero(t, inFlight.Load(), "a Metadata request reached the host beside pipelined ones")
						_ = r.Respond(kmsg.NewPtrMetadataResponse())
						return
					}
					n := inFlight.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					body, err := io.ReadAll(r.Raw) // the body is read before the next request is
					assert.NoError(t, err)
					assert.Equal(t, r.Raw.BodyLen(), len(body))
					answering.Go(func() {
						// Later requests answered sooner: answers wait for earlier ones.
						time.Sleep(time.Duration(5-r.CorrelationID%5) * time.Millisecond)
						inFlight.Add(-1)
						resp := rawResponseOf(r.APIKey, r.CorrelationID)
						if r.CorrelationID%3 == 0 {
							assert.NoError(t, r.RespondRawFrom(bytes.NewReader(resp), int64(len(resp))))
							return
						}
						assert.NoError(t, r.RespondRaw(resp))
					})
				}))
			c := socketservertest.Dial(t, srv, "PLAINTEXT")
			var reqs []kmsg.Request
			var all []byte
			for i := range 60 {
				var req kmsg.Request
				switch i % 6 {
				case 0:
					req = produceOf(100000 + i) // streamed
				case 5:
					req = metadataReq(12)
				case 2, 4:
					f := kmsg.NewPtrFetchRequest()
					f.Version = 12
					req = f
				default:
					req = produceOf(100) // whole
				}
				reqs = append(reqs, req)
				all = append(all, formatter.AppendRequest(nil, req, int32(i))...)
			}
			go func() { _, _ = c.Write(all) }()
			for i, req := range reqs {
				if req.Key() == 3 {
					readResponse(t, c, metadataResp(12), int32(i))
					continue
				}
				require.Equal(t, rawResponseOf(req.Key(), int32(i)), readRawResponse(t, c, int32(i), req.IsFlexible()), "answer %d", i)
			}
			// At most the depth at once, and more than one when it allows (the
			// answers come within 5 ms, and a worker may be slow to take a request).
			require.LessOrEqual(t, int(most.Load()), depth, "requests the host held at once")
			require.GreaterOrEqual(t, int(most.Load()), min(depth, 2), "requests the host held at once")
			waitFor(t, 5*time.Second, func() bool { return srv.Stats().RequestMemory[protocolmap.DataPlane].Used == 0 },
				"every request's memory given back")
		})
	}
}

// The depth bounds what the host holds: the next request is read once an
// answer has been written, and answers given out of order wait.
func TestPipelineDepth(t *testing.T) {
	_, c, h := servePipelined(t, nil, 2)
	write(t, c, produceFrames(4, 100))
	reqs := h.wait(t, 2)
	time.Sleep(50 * time.Millisecond)
	require.Equal(t, 2, h.count(), "the host holds two at most")

	require.NoError(t, reqs[1].RespondRaw(rawResponseOf(0, 1))) // the second: waits for the first
	time.Sleep(50 * time.Millisecond)
	require.Equal(t, 2, h.count(), "an answer waiting for an earlier one holds its place")
	require.NoError(t, c.SetReadDeadline(time.Now().Add(20*time.Millisecond)))
	_, err := c.Read(make([]byte, 1))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "nothing is written before the first answer")
	require.NoError(t, c.SetReadDeadline(time.Time{}))

	require.NoError(t, reqs[0].RespondRaw(rawResponseOf(0, 0)))
	require.Equal(t, rawResponseOf(0, 0), readRawResponse(t, c, 0, true))
	require.Equal(t, rawResponseOf(0, 1), readRawResponse(t, c, 1, true))
	reqs = h.wait(t, 4)
	require.NoError(t, reqs[2].RespondRaw(rawResponseOf(0, 2)))
	require.NoError(t, reqs[3].NoResponse())
	require.Equal(t, rawResponseOf(0, 2), readRawResponse(t, c, 2, true))
	send(t, c, metadataReq(12), 9) // read once nothing is pipelined
	reqs = h.wait(t, 5)
	require.NoError(t, reqs[4].Respond(kmsg.NewPtrMetadataResponse()))
	readResponse(t, c, metadataResp(12), 9)
}

// A connection that ends with pipelined requests held: the client closes
// (their answers are dropped, RespondRawFrom says the connection closed,
// and the request log has them closed), or half-closes and Shutdown
// drains (their answers are written first).
func TestPipelineConnectionEnds(t *testing.T) {
	t.Run("client goes, the host closes", func(t *testing.T) {
		logs := &requestLogs{}
		srv, c, h := servePipelined(t, streamProps, 5, logs)
		id := connID(t, srv, c)
		write(t, c, produceFrames(3, 1000))
		reqs := h.wait(t, 3)
		require.NoError(t, reqs[2].RespondRaw(rawResponseOf(0, 2))) // waits for the first two
		require.NoError(t, c.Close())
		<-reqs[0].Context().Done() // the client's EOF
		require.NoError(t, reqs[0].CloseConnection())
		resp := rawResponseOf(0, 1)
		require.ErrorIs(t, reqs[1].RespondRawFrom(bytes.NewReader(resp), int64(len(resp))), socketserver.ErrConnectionClosed)
		for _, l := range logs.of(t, id, 3) {
			assert.True(t, l.Closed, "request %d logged closed", l.CorrelationID)
		}
		waitFor(t, 5*time.Second, func() bool { return srv.Stats().RequestMemory[protocolmap.DataPlane].Used == 0 },
			"the held requests' memory given back")
	})
	t.Run("half-closed, then Shutdown drains", func(t *testing.T) {
		srv, c, h := servePipelined(t, nil, 5)
		write(t, c, produceFrames(3, 1000))
		require.NoError(t, c.(*net.TCPConn).CloseWrite())
		reqs := h.wait(t, 3)
		shutdown := make(chan error, 1)
		go func() { shutdown <- srv.Shutdown(t.Context()) }()
		time.Sleep(50 * time.Millisecond)
		for i := 2; i >= 0; i-- {
			require.NoError(t, reqs[i].RespondRaw(rawResponseOf(0, int32(i))))
		}
		for i := range 3 {
			require.Equal(t, rawResponseOf(0, int32(i)), readRawResponse(t, c, int32(i), true))
		}
		require.NoError(t, <-shutdown)
		requireClosed(t, c)
	})
}

// A pipelined request that waits for a place in the queue when its
// connection is closed is dropped with the others, and logged once, as
// closed, like them. (Without -race the third request is reliably caught
// waiting for the queue; under -race it may already be in it.)
func TestPipelineClosedWhileQueued(t *testing.T) {
	release := newGate()
	defer release.open()
	logs := &requestLogs{}
	srv := socketservertest.NewServer(t, config.Properties{"num.io.threads": "1", "queued.max.requests": "1"},
		func(c *socketserver.Config) {
			c.APIs = pipelinedAPIs(5)
			c.Hooks = []socketserver.Hook{logs}
		}, socketserver.HandlerFunc(func(r *socketserver.Request) {
			release.wait()
			_ = r.NoResponse()
		}))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	id := connID(t, srv, c)
	write(t, c, produceFrames(3, 100)) // the worker holds the first, the queue the second, the third waits
	waitFor(t, 5*time.Second, func() bool {
		for _, conn := range srv.Registry().Snapshot(connregistry.Filter{ConnectionIDs: []string{id}}) {
			if conn.Requests >= 3 {
				return true
			}
		}
		return false
	}, "the third request read")
	time.Sleep(50 * time.Millisecond) // and waiting for the queue
	require.Len(t, srv.Registry().Close(connregistry.Filter{ConnectionIDs: []string{id}}, connregistry.CloseByOperator), 1)
	release.open()
	logs.of(t, id, 3)
	time.Sleep(100 * time.Millisecond) // a second log of one of them would come meanwhile
	got := logs.of(t, id, 3)
	require.Len(t, got, 3, "each request logged once")
	seen := map[int32]bool{}
	for _, l := range got {
		assert.True(t, l.Closed, "request %d logged closed", l.CorrelationID)
		assert.False(t, seen[l.CorrelationID], "request %d logged twice", l.CorrelationID)
		seen[l.CorrelationID] = true
	}
}

// A throttled pipelined answer mutes the connection from its write: the
// request sent after it is read once the throttle has passed.
func TestPipelineThrottle(t *testing.T) {
	const throttle = 300 * time.Millisecond
	_, c, h := servePipelined(t, nil, 5)
	write(t, c, formatter.AppendRequest(nil, produceOf(100), 1))
	r := h.wait(t, 1)[0]
	require.NoError(t, r.Throttle(throttle))
	start := time.Now()
	require.NoError(t, r.RespondRaw(rawResponseOf(0, 1)))
	require.Equal(t, rawResponseOf(0, 1), readRawResponse(t, c, 1, true))
	write(t, c, formatter.AppendRequest(nil, produceOf(100), 2))
	h.wait(t, 2)
	require.GreaterOrEqual(t, time.Since(start), throttle, "the next request was read after the throttle")
	require.NoError(t, h.wait(t, 2)[1].NoResponse())
}

// A pipelined request's streamed body may be read after its inline
// handler has returned, on a goroutine of the host's (a proxy hands it to
// its upstream connection's writer, so that a client that trickles its
// body holds no inline slot): the connection reads the next request as
// soon as the body has been read whole, not at its next look (here an
// hour away), nor once the request is answered.
func TestPipelinedBodyReadAfterTheHandler(t *testing.T) {
	t.Cleanup(socketserver.SetStreamWatchAfter(time.Hour)) // after the server has closed
	h := newHeld()
	var reading sync.WaitGroup
	defer reading.Wait()
	srv := socketservertest.NewServer(t, streamProps, func(c *socketserver.Config) {
		c.APIs = socketserver.Inline(socketserver.HandlerFunc(func(r *socketserver.Request) {
			reading.Go(func() { // reads on once the handler has returned
				n, err := io.Copy(io.Discard, r.Raw)
				assert.NoError(t, err)
				assert.Equal(t, int64(r.Raw.BodyLen()), n, "the body's bytes")
			})
			h.add(r)
		}), pipelinedAPIs(2)...)
	}, socketserver.HandlerFunc(func(r *socketserver.Request) { t.Errorf("API key %d reached Serve", r.APIKey) }))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	frames := produceFrames(2, 100000) // streamed
	first := len(formatter.AppendRequest(nil, produceOf(100000), 0))
	write(t, c, frames[:first-1000]) // the first body's last bytes come once its handler has returned
	h.wait(t, 1)
	time.Sleep(20 * time.Millisecond)
	write(t, c, frames[first-1000:])
	reqs := h.wait(t, 2) // unanswered: the first body's end let the second in
	reading.Wait()
	for i, r := range reqs {
		require.NoError(t, r.RespondRaw(rawResponseOf(0, int32(i))))
	}
	for i := range reqs {
		require.Equal(t, rawResponseOf(0, int32(i)), readRawResponse(t, c, int32(i), true))
	}
}
