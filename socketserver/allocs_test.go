package socketserver_test

import (
	"bytes"
	"io"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// TestGuardAllocationsPerRequest holds the per-request path to its budget
// (see guards_test.go): three heap allocations per small request in the
// server's own code (the request, its frame, and the decoded body; the
// frame is apart so that a host keeping its bytes keeps nothing else:
// TestKeptRecordsDoNotKeepTheConnection), and none for an ApiVersions
// request the server answers itself from its read buffer. The handler here
// reuses one response, so that every allocation counted is the server's.
func TestGuardAllocationsPerRequest(t *testing.T) {
	if raceEnabled {
		t.Skip(raceSkip)
	}
	resp := kmsg.NewPtrMetadataResponse()
	resp.ClusterID = kmsg.StringPtr("allocs")
	reuse := socketserver.HandlerFunc(func(r *socketserver.Request) { _ = r.Respond(resp) })
	for _, tt := range []struct {
		name   string
		req    kmsg.Request
		budget perRequest // allocations and bytes per request
	}{
		{"ApiVersions v3 answered by the server", apiVersionsReq(3, "allocs", "1.0"), answeredInPlace},
		{"ApiVersions v0 answered by the server", apiVersionsReq(0, "", ""), answeredInPlace},
		{"Metadata v12 through the request channel", metadataReq(12), smallDecoded},
		{"Metadata v1 through the request channel", metadataReq(1), smallDecoded},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := socketservertest.NewServer(t, nil, withAPIs, reuse)
			requirePerRequest(t, newBenchClient(socketservertest.Dial(t, srv, "PLAINTEXT"), tt.req), tt.budget)
		})
	}
}

// TestGuardAllocationsPerRawRequest holds the raw path (API.Raw) to its
// budget: a request read whole costs its frame and one allocation holding
// the request, its raw form and its raw answer's state; a streamed one its
// header and that allocation, never a copy of its body. Answering with
// RespondRaw or RespondRawFrom (from a reader: through a pooled buffer;
// from an inline handler: written on its goroutine) and reading a
// streamed body (WriteTo) allocate nothing. The handlers reuse their
// response and reader.
func TestGuardAllocationsPerRawRequest(t *testing.T) {
	if raceEnabled {
		t.Skip(raceSkip)
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
		budget perRequest // allocations and bytes per request
	}{
		{"Metadata v12 read whole, RespondRawFrom a TCP connection", metadataReq(12), false, fromTCP, smallRaw},
		{"Produce of 64 KiB streamed to a TCP connection, RespondRaw", produceOf(64 << 10), false, toTCP, smallRaw},
		{"Metadata v12 read whole, RespondRaw", metadataReq(12), false, respondRaw, smallRaw},
		{"Metadata v1 read whole, RespondRaw", metadataReq(1), false, respondRaw, smallRaw},
		{"Metadata v12 read whole, inline, RespondRaw", metadataReq(12), true, respondRaw, smallRaw},
		{"Produce of 64 KiB streamed, WriteTo, RespondRaw", produceOf(64 << 10), false, respondRaw, smallRaw},
		{"Metadata v12 read whole, RespondRawFrom", metadataReq(12), false, respondFrom, smallRaw},
		{"Metadata v12 read whole, inline, RespondRawFrom", metadataReq(12), true, respondFrom, smallRaw},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) {
				c.APIs = rawAPIs(1 << 10)
				if tt.inline {
					c.APIs = socketserver.Inline(tt.h, c.APIs...)
				}
			}, tt.h)
			requirePerRequest(t, newBenchClient(socketservertest.Dial(t, srv, "PLAINTEXT"), tt.req), tt.budget)
		})
	}
}

// TestGuardAllocationsPerFetch holds a Fetch answered with records by
// reference (FetchResponse) to the request's own allocations: writing the
// response, its header and field pieces and the host's batches in vectored
// writes, allocates nothing, however many pieces it has (more than one
// writev takes, 1,024, too). The handler answers inline, reusing one
// response, so that every allocation counted is the server's.
func TestGuardAllocationsPerFetch(t *testing.T) {
	if raceEnabled {
		t.Skip(raceSkip)
	}
	for _, tt := range []struct {
		name       string
		partitions int
		batches    [][]byte
		budget     perRequest
	}{
		{"one partition of 3 batches", 1, [][]byte{bytes.Repeat([]byte{'a'}, 1000), bytes.Repeat([]byte{'b'}, 10), bytes.Repeat([]byte{'c'}, 300)}, fetchByReference},
		{"400 partitions of 3 batches: 1,601 pieces", 400, [][]byte{{'a'}, {'b'}, {'c'}}, fetchByReference400},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := kmsg.NewPtrFetchRequest()
			req.Version = 12
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = "t"
			resp := &socketserver.FetchResponse{FetchResponse: kmsg.NewPtrFetchResponse()}
			resp.Version = req.Version
			st := kmsg.NewFetchResponseTopic()
			st.Topic = "t"
			var recs []socketserver.FetchRecords
			for i := range tt.partitions {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition = int32(i)
				rt.Partitions = append(rt.Partitions, rp)
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition = int32(i)
				st.Partitions = append(st.Partitions, sp)
				recs = append(recs, socketserver.FetchRecords{Batches: tt.batches})
			}
			req.Topics = []kmsg.FetchRequestTopic{rt}
			resp.Topics = []kmsg.FetchResponseTopic{st}
			resp.Records = [][]socketserver.FetchRecords{recs}
			reuse := socketserver.HandlerFunc(func(r *socketserver.Request) { _ = r.Respond(resp) })
			srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) {
				c.APIs = socketserver.Inline(reuse, socketserver.KmsgAPI(kmsg.Fetch, 4, 12))
			}, reuse)
			requirePerRequest(t, newBenchClient(socketservertest.Dial(t, srv, "PLAINTEXT"), req), tt.budget)
		})
	}
}
