package socketserver_test

import (
	"bytes"
	"io"
	"runtime"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// TestAllocationsPerRequest holds the per-request path to its allocation
// budget: at most three heap allocations per small request in the server's
// own code (the request, its frame, and the decoded body; the frame is
// apart so that a host keeping its bytes keeps nothing else:
// TestKeptRecordsDoNotKeepTheConnection), and none for an ApiVersions
// request the server answers itself from its read buffer. The handler here reuses
// one response, so that every allocation counted is the server's. The race
// detector's sync.Pool drops a quarter of what it is given, so under -race
// the response buffers cost a fraction of an allocation more.
func TestAllocationsPerRequest(t *testing.T) {
	resp := kmsg.NewPtrMetadataResponse()
	resp.ClusterID = kmsg.StringPtr("allocs")
	reuse := socketserver.HandlerFunc(func(r *socketserver.Request) { _ = r.Respond(resp) })
	slack := 0.0
	if raceEnabled {
		slack = 0.5
	}
	for _, tt := range []struct {
		name string
		req  kmsg.Request
		max  float64
	}{
		{"ApiVersions v3 answered by the server", apiVersionsReq(3, "allocs", "1.0"), 0},
		{"ApiVersions v0 answered by the server", apiVersionsReq(0, "", ""), 0},
		{"Metadata v12 through the request channel", metadataReq(12), 3},
		{"Metadata v1 through the request channel", metadataReq(1), 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := socketservertest.NewServer(t, nil, withAPIs, reuse)
			bc := newBenchClient(socketservertest.Dial(t, srv, "PLAINTEXT"), tt.req)
			for range 100 { // warm the server's buffers and the runtime's caches
				if err := bc.roundTrip(); err != nil {
					t.Fatal(err)
				}
			}
			got := testing.AllocsPerRun(2000, func() {
				if err := bc.roundTrip(); err != nil {
					t.Fatal(err)
				}
			})
			if got > tt.max+slack {
				t.Errorf("%.2f allocations per request, want at most %v", got, tt.max)
			}
			t.Logf("%.2f allocations per request", got)
		})
	}
}

// TestAllocationsPerRawRequest holds the raw path (API.Raw) to the frame:
// a request read whole costs its frame and one allocation holding the
// request, its raw form and its raw answer's state; a streamed one its
// header and that allocation. Answering with RespondRaw or RespondRawFrom
// (from a reader: through a pooled buffer; from an inline handler: written
// on its goroutine) and reading a streamed body (WriteTo) allocate
// nothing. The handlers reuse their response and reader.
func TestAllocationsPerRawRequest(t *testing.T) {
	slack := 0.0
	if raceEnabled {
		slack = 0.5
	}
	resp := kmsg.NewPtrMetadataResponse().AppendTo(nil)
	var mu sync.Mutex
	src := bytes.NewReader(nil)
	respondRaw := socketserver.HandlerFunc(func(r *socketserver.Request) {
		if r.Raw.Streamed() {
			_, _ = io.Copy(io.Discard, r.Raw)
		}
		_ = r.RespondRaw(resp)
	})
	respondFrom := socketserver.HandlerFunc(func(r *socketserver.Request) {
		mu.Lock() // one request at a time on the one connection: never contended
		defer mu.Unlock()
		src.Reset(resp)
		_ = r.RespondRawFrom(src, int64(len(resp)))
	})
	up, upServer := tcpPair(t) // an upstream: what the handler writes to up, it answers from upServer
	fromTCP := socketserver.HandlerFunc(func(r *socketserver.Request) {
		if _, err := up.Write(resp); err != nil {
			_ = r.CloseConnection()
			return
		}
		_ = r.RespondRawFrom(upServer, int64(len(resp)))
	})
	sink, sinkServer := tcpPair(t) // a streamed body goes to sink, socket to socket
	go func() {
		buf := make([]byte, 64<<10)
		for {
			if _, err := sinkServer.Read(buf); err != nil {
				return
			}
		}
	}()
	toTCP := socketserver.HandlerFunc(func(r *socketserver.Request) {
		_, _ = io.Copy(sink, r.Raw)
		_ = r.RespondRaw(resp)
	})
	for _, tt := range []struct {
		name   string
		req    kmsg.Request
		inline bool
		h      socketserver.Handler
		max    float64
	}{
		{"Metadata v12 read whole, RespondRawFrom a TCP connection", metadataReq(12), false, fromTCP, 2},
		{"Produce of 64 KiB streamed to a TCP connection, RespondRaw", produceOf(64 << 10), false, toTCP, 2},
		{"Metadata v12 read whole, RespondRaw", metadataReq(12), false, respondRaw, 2},
		{"Metadata v1 read whole, RespondRaw", metadataReq(1), false, respondRaw, 2},
		{"Metadata v12 read whole, inline, RespondRaw", metadataReq(12), true, respondRaw, 2},
		{"Produce of 64 KiB streamed, WriteTo, RespondRaw", produceOf(64 << 10), false, respondRaw, 2},
		{"Metadata v12 read whole, RespondRawFrom", metadataReq(12), false, respondFrom, 2},
		{"Metadata v12 read whole, inline, RespondRawFrom", metadataReq(12), true, respondFrom, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) {
				c.APIs = rawAPIs(1 << 10)
				if tt.inline {
					c.APIs = socketserver.Inline(tt.h, c.APIs...)
				}
			}, tt.h)
			bc := newBenchClient(socketservertest.Dial(t, srv, "PLAINTEXT"), tt.req)
			for range 100 {
				if err := bc.roundTrip(); err != nil {
					t.Fatal(err)
				}
			}
			got := testing.AllocsPerRun(1000, func() {
				if err := bc.roundTrip(); err != nil {
					t.Fatal(err)
				}
			})
			if got > tt.max+slack {
				t.Errorf("%.2f allocations per request, want at most %v", got, tt.max)
			}
			// The bytes: the request's allocation and its frame (a streamed
			// body's header), never a copy of a streamed body. (Not under
			// the race detector, whose pools drop what they are given.)
			if raceEnabled {
				return
			}
			const n = 200
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range n {
				if err := bc.roundTrip(); err != nil {
					t.Fatal(err)
				}
			}
			runtime.ReadMemStats(&after)
			perRequest := (after.TotalAlloc - before.TotalAlloc) / n
			if perRequest > 2<<10 {
				t.Errorf("%d bytes allocated per request of %d bytes, want at most 2 KiB", perRequest, len(bc.req))
			}
			t.Logf("%.2f allocations, %d bytes per request of %d bytes", got, perRequest, len(bc.req))
		})
	}
}
