package socketserver_test

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// Connections that pipeline requests answered inline serve them in turns:
// with GOMAXPROCS 2, one connection at a time serves a request that was
// in its buffer when the one before was answered, so that they never
// fill every P and the connections that wait on the network are served
// at once. (Without turns, both pipelining connections' handlers run at
// the same time, and many such connections delay every other client by the
// scheduler's 10 ms slices.)
func TestPipelinedRequestsTakeTurns(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	type span struct {
		conn       string
		corr       int32
		start, end time.Time
	}
	var (
		mu    sync.Mutex
		spans []span
	)
	srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) {
		c.APIs = socketserver.Inline(socketserver.HandlerFunc(func(r *socketserver.Request) {
			start := time.Now()
			time.Sleep(2 * time.Millisecond) // a handler's work, on the connection's goroutine
			mu.Lock()
			spans = append(spans, span{r.Conn.ID, r.CorrelationID, start, time.Now()})
			mu.Unlock()
			_ = respondEmpty(r)
		}), mustKmsgAPI(kmsg.Metadata))
	}, answerAll)

	const conns, pipelined = 3, 5
	var wg sync.WaitGroup
	for range conns {
		c := socketservertest.Dial(t, srv, "PLAINTEXT")
		var b []byte
		for corr := range int32(pipelined) {
			b = append(b, formatter.AppendRequest(nil, metadataReq(1), corr)...)
		}
		require.Less(t, len(b), 256, "the requests fit a connection's read buffer")
		wg.Go(func() {
			write(t, c, b)
			for corr := range int32(pipelined) {
				resp := kmsg.NewPtrMetadataResponse()
				resp.Version = 1
				readResponse(t, c, resp, corr)
			}
		})
	}
	wg.Wait()
	require.Len(t, spans, conns*pipelined)
	// A connection's first request was read from the socket; the others
	// were in its buffer: no two of those, of different connections, run
	// at once.
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if a.conn == b.conn || a.corr == 0 || b.corr == 0 {
				continue
			}
			assert.False(t, a.start.Before(b.end) && b.start.Before(a.end),
				"pipelined requests of %s (%d) and %s (%d) were served at the same time", a.conn, a.corr, b.conn, b.corr)
		}
	}
}

// A connection that pipelines and stops reading its answers holds a turn
// at most turnWriteWait: another pipelining client goes on being served.
// (net.Pipe has no buffer: the hog's second answer, written in a turn,
// waits for a read that never comes.)
func TestTurnsSurviveAClientThatDoesNotRead(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	pl := socketservertest.NewPipeListener("in-memory")
	socketservertest.NewServer(t, nil, func(c *socketserver.Config) {
		c.Listen = listenOn(pl)
		c.APIs = socketserver.Inline(socketserver.HandlerFunc(func(r *socketserver.Request) {
			_ = respondEmpty(r)
		}), mustKmsgAPI(kmsg.Metadata))
	}, answerAll)
	pipelined := func(n int32) []byte {
		var b []byte
		for corr := range n {
			b = append(b, formatter.AppendRequest(nil, metadataReq(1), corr)...)
		}
		return b
	}
	hog := pipeDial(t, pl)
	go func() { _, _ = hog.Write(pipelined(3)) }()
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 1
	readResponse(t, hog, resp, 0) // and no more: the second answer waits, in a turn
	time.Sleep(50 * time.Millisecond)

	c := pipeDial(t, pl)
	require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	go func() { _, _ = c.Write(pipelined(5)) }()
	for corr := range int32(5) {
		readResponse(t, c, resp, corr)
	}
}
