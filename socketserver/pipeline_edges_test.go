package socketserver_test

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// One connection's pipelined frames of at most 64 KiB, which take memory
// without waiting elsewhere, wait for the budget while the host holds
// earlier ones: one client that pipelines cannot hold a small frame's
// worth per request past queued.max.request.bytes (it held 40 frames of
// 60 KiB, 18 times a budget of 128 KiB). Answering them lets the rest in.
func TestPipelineKeepsToTheBudget(t *testing.T) {
	const budget, frames, size = 128 << 10, 40, 60 << 10
	h := newHeld()
	srv := socketservertest.NewServer(t, config.Properties{
		"socket.request.max.bytes": strconv.Itoa(budget),
		"queued.max.request.bytes": strconv.Itoa(budget),
	}, func(c *socketserver.Config) {
		c.APIs = socketserver.Raw(socketserver.API{Key: 0, MinVersion: 3, MaxVersion: 12, Pipeline: 64})
	}, socketserver.HandlerFunc(h.add))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	go func() { _, _ = c.Write(produceFrames(frames, size)) }()
	h.wait(t, 1)
	time.Sleep(300 * time.Millisecond) // as many as the budget lets in
	used := srv.Stats().RequestMemory[protocolmap.DataPlane].Used
	assert.LessOrEqual(t, used, budget+size+4096, "one connection's pipelined small frames overshoot the budget")
	assert.Less(t, h.count(), frames)
	t.Logf("%d requests held, budget %d, used %d", h.count(), budget, used)
	answered := map[*socketserver.Request]bool{}
	for len(answered) < frames {
		for _, r := range h.wait(t, len(answered)+1) {
			if !answered[r] {
				answered[r] = true
				require.NoError(t, r.NoResponse())
			}
		}
	}
}

// A pipelined streamed request answered before its body has arrived is
// answered at once: the connection's goroutine drops the body's rest.
// The answering goroutine (a Serve worker) drained it itself before, so
// RespondRaw blocked as long as the client withheld the body.
func TestPipelinedAnswerBeforeTheStreamedBody(t *testing.T) {
	h := newHeld()
	srv := socketservertest.NewServer(t, streamProps, func(c *socketserver.Config) {
		c.APIs = pipelinedAPIs(5)
	}, socketserver.HandlerFunc(h.add))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	f := formatter.AppendRequest(nil, produceOf(100000), 0)
	write(t, c, f[:1000]) // head and a little of the body, then nothing
	r := h.wait(t, 1)[0]
	require.True(t, r.Raw.Streamed())
	done := make(chan error, 1)
	go func() { done <- r.RespondRaw(rawResponseOf(r.APIKey, r.CorrelationID)) }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(2 * time.Second):
		write(t, c, f[1000:]) // let it go
		<-done
		t.Fatal("RespondRaw blocked while the client withheld the rest of the streamed body")
	}
}

// A WriteTo after the streamed body was read whole writes nothing and
// leaves the read buffer alone, which the peer watcher reads by then (it
// looked at the buffer: a data race).
func TestWriteToAfterTheWholeBody(t *testing.T) {
	reqs := make(chan *socketserver.Request, 4)
	srv := socketservertest.NewServer(t, streamProps, func(c *socketserver.Config) {
		c.APIs = append(socketserver.Raw(socketserver.API{Key: 0, MinVersion: 3, MaxVersion: 12, StreamAbove: 4096}),
			mustKmsgAPI(kmsg.Metadata))
	}, socketserver.HandlerFunc(func(r *socketserver.Request) { reqs <- r }))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	write(t, c, formatter.AppendRequest(nil, produceOf(100000), 0))
	r := recv(t, reqs)
	require.True(t, r.Raw.Streamed())
	var sink bytes.Buffer
	_, err := sink.ReadFrom(r.Raw) // whole body
	require.NoError(t, err)
	body := sink.Len()
	time.Sleep(50 * time.Millisecond) // the watcher starts reading
	next := formatter.AppendRequest(nil, metadataReq(1), 1)
	write(t, c, next[:3]) // a few bytes of the next request
	time.Sleep(50 * time.Millisecond)
	n, err := r.Raw.WriteTo(&sink) // nothing left
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, body, sink.Len())
	require.NoError(t, r.RespondRaw(rawResponseOf(0, 0)))
	require.Equal(t, rawResponseOf(0, 0), readRawResponse(t, c, 0, true))
	// The next request's first bytes were left where they were.
	write(t, c, next[3:])
	r = recv(t, reqs)
	assert.Equal(t, int16(3), r.APIKey)
	assert.Equal(t, int32(1), r.CorrelationID)
}

// Shutdown while a pipelined request is held and the client's next frame
// is half sent: the held request's answer is written before the
// connection closes (it was lost: the wake cut the frame short, and the
// connection shut its write side before the pipeline's answers).
func TestShutdownMidFrameKeepsPipelinedAnswers(t *testing.T) {
	srv, c, h := servePipelined(t, nil, 5)
	f := kmsg.NewPtrFetchRequest()
	f.Version = 4
	write(t, c, formatter.AppendRequest(nil, f, 0))
	r0 := h.wait(t, 1)[0]
	next := formatter.AppendRequest(nil, f, 1)
	write(t, c, next[:10]) // the next frame begins
	time.Sleep(50 * time.Millisecond)
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		shut <- srv.Shutdown(ctx)
	}()
	time.Sleep(200 * time.Millisecond)
	_ = r0.RespondRaw(rawResponseOf(r0.APIKey, 0)) // answered while Shutdown drains
	require.Equal(t, rawResponseOf(r0.APIKey, 0), readRawResponse(t, c, 0, false))
	<-shut
}

// An inline handler whose RespondRawFrom waits, on the connection's
// goroutine, for an earlier pipelined answer returns once the connection
// has closed and the earlier request is answered: Close does not hang.
// The earlier answer, given after the close, wrote nothing and woke no
// one, so the handler, and Close, waited for ever.
func TestInlineRespondRawFromWhenTheConnectionCloses(t *testing.T) {
	release := make(chan struct{})
	returned := make(chan error, 1)
	h := socketserver.HandlerFunc(func(r *socketserver.Request) {
		if r.CorrelationID == 0 { // held: answered later
			go func() {
				<-release
				_ = r.RespondRaw(rawResponseOf(r.APIKey, r.CorrelationID))
			}()
			return
		}
		resp := rawResponseOf(r.APIKey, r.CorrelationID)
		returned <- r.RespondRawFrom(bytes.NewReader(resp), int64(len(resp))) // waits for corr 0's answer
	})
	srv, stop, err := socketservertest.Start(nil, func(c *socketserver.Config) {
		c.APIs = socketserver.Inline(h, socketserver.Raw(socketserver.API{Key: 1, MinVersion: 4, MaxVersion: 12, Pipeline: 5})...)
	}, answerAll)
	require.NoError(t, err)
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	f := kmsg.NewPtrFetchRequest()
	f.Version = 4
	write(t, c, append(formatter.AppendRequest(nil, f, 0), formatter.AppendRequest(nil, f, 1)...))
	time.Sleep(100 * time.Millisecond) // corr 1's handler waits in RespondRawFrom
	closed := make(chan error, 1)
	go func() { closed <- stop() }()
	time.Sleep(100 * time.Millisecond) // the connection is closed
	close(release)
	select {
	case err := <-returned:
		require.ErrorIs(t, err, socketserver.ErrConnectionClosed)
	case <-time.After(10 * time.Second):
		t.Fatal("RespondRawFrom still waits after the connection closed and the earlier request was answered")
	}
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Close has not returned")
	}
}

// An inline handler whose RespondRawFrom waits for an earlier pipelined
// answer gives up the plane's turn (GOMAXPROCS-1 = 1 here) while it
// waits, so another connection's buffered requests are served meanwhile;
// they waited for it before.
func TestInlineRespondRawFromGivesUpTheTurn(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	release := make(chan struct{})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	h := socketserver.HandlerFunc(func(r *socketserver.Request) {
		if r.Raw == nil {
			_ = respondEmpty(r)
			return
		}
		if r.CorrelationID == 0 { // held: answered later
			go func() {
				<-release
				_ = r.RespondRaw(rawResponseOf(r.APIKey, r.CorrelationID))
			}()
			return
		}
		resp := rawResponseOf(r.APIKey, r.CorrelationID)
		_ = r.RespondRawFrom(bytes.NewReader(resp), int64(len(resp))) // waits for corr 0's answer
	})
	srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) {
		c.APIs = socketserver.Inline(h, append(socketserver.Raw(
			socketserver.API{Key: 1, MinVersion: 4, MaxVersion: 12, Pipeline: 5}),
			mustKmsgAPI(kmsg.Metadata))...)
	}, answerAll)

	fetches := twoFetches()
	require.Less(t, len(fetches), 256, "both in the read buffer at once")
	write(t, socketservertest.Dial(t, srv, "PLAINTEXT"), fetches)
	time.Sleep(200 * time.Millisecond) // the second Fetch's handler waits in RespondRawFrom
	requireServedMeanwhile(t, srv, func() { close(release) },
		"another connection's pipelined Metadata waited for a turn held by a RespondRawFrom waiting on an earlier answer")
	close(release)
}

// twoFetches is two Fetch v4 frames (correlation ids 0 and 1), to be
// written at once: the second is in the read buffer whole when the
// first has been read, so it is served in a turn.
func twoFetches() []byte {
	f := kmsg.NewPtrFetchRequest()
	f.Version = 4
	var b []byte
	for corr := range int32(2) {
		b = append(b, formatter.AppendRequest(nil, f, corr)...)
	}
	return b
}

// requireServedMeanwhile sends two Metadata requests at once on a new
// connection to srv and fails with msg unless both are answered within
// 2 s; unblock then lets whatever held them go.
func requireServedMeanwhile(t *testing.T, srv *socketserver.Server, unblock func(), msg string) {
	t.Helper()
	other := socketservertest.Dial(t, srv, "PLAINTEXT")
	var m []byte
	for corr := range int32(2) {
		m = append(m, formatter.AppendRequest(nil, metadataReq(1), corr)...)
	}
	write(t, other, m)
	got := make(chan struct{})
	go func() {
		for corr := range int32(2) {
			resp := kmsg.NewPtrMetadataResponse()
			resp.Version = 1
			readResponse(t, other, resp, corr)
		}
		close(got)
	}()
	select {
	case <-got:
	case <-time.After(2 * time.Second):
		unblock()
		<-got
		t.Fatal(msg)
	}
}

// A pipelining connection whose small buffered frame waits for memory
// (its host holds an earlier request, the pool is spent) gives up the
// plane's turn (GOMAXPROCS-1 = 1 here) while it waits: another
// connection's buffered Metadata is served meanwhile.
func TestSmallFrameWaitsForMemoryWithoutATurn(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	h := newHeld()
	srv := socketservertest.NewServer(t, config.Properties{
		"queued.max.request.bytes": "16384",
		"socket.request.max.bytes": "16384",
	}, func(c *socketserver.Config) {
		c.APIs = append(socketserver.Raw(
			socketserver.API{Key: 0, MinVersion: 3, MaxVersion: 12, Pipeline: 5},
			socketserver.API{Key: 1, MinVersion: 4, MaxVersion: 17, Pipeline: 5},
		), mustKmsgAPI(kmsg.Metadata))
	}, socketserver.HandlerFunc(func(r *socketserver.Request) {
		if r.Raw == nil {
			_ = respondEmpty(r)
			return
		}
		h.add(r)
	}))
	answer := func() {
		for _, r := range h.wait(t, 0) {
			_ = r.RespondRaw(rawResponseOf(r.APIKey, r.CorrelationID))
		}
	}
	defer answer()
	for i := range 2 {
		cc := socketservertest.Dial(t, srv, "PLAINTEXT")
		write(t, cc, formatter.AppendRequest(nil, produceOf(9000), 0)) // spend the pool, held
		h.wait(t, i+1)
	}
	write(t, socketservertest.Dial(t, srv, "PLAINTEXT"), twoFetches())
	h.wait(t, 3)
	time.Sleep(200 * time.Millisecond) // the second Fetch's frame waits for memory, read in a turn
	requireServedMeanwhile(t, srv, answer,
		"another connection's buffered Metadata waited for a turn held by a frame waiting for memory")
}
