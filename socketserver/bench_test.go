package socketserver_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// benchClient does round trips of one pre-encoded request on a connection,
// allocating nothing itself, so that allocs/op are the server's.
type benchClient struct {
	c     net.Conn
	req   []byte
	size  [4]byte
	resp  []byte
	corr  int32
	depth int // requests written and not yet answered
}

func newBenchClient(c net.Conn, req kmsg.Request) *benchClient {
	return &benchClient{c: c, req: formatter.AppendRequest(nil, req, 0), resp: make([]byte, 0, 4096)}
}

func (bc *benchClient) write() error {
	bc.corr++
	binary.BigEndian.PutUint32(bc.req[8:], uint32(bc.corr))
	_, err := bc.c.Write(bc.req)
	bc.depth++
	return err
}

func (bc *benchClient) read() error {
	if _, err := io.ReadFull(bc.c, bc.size[:]); err != nil {
		return err
	}
	n := int(binary.BigEndian.Uint32(bc.size[:]))
	if n > cap(bc.resp) {
		bc.resp = make([]byte, n)
	}
	bc.resp = bc.resp[:n]
	if _, err := io.ReadFull(bc.c, bc.resp); err != nil {
		return err
	}
	bc.depth--
	if want := bc.corr - int32(bc.depth); int32(binary.BigEndian.Uint32(bc.resp)) != want {
		return io.ErrUnexpectedEOF
	}
	return nil
}

func (bc *benchClient) roundTrip() error {
	if err := bc.write(); err != nil {
		return err
	}
	return bc.read()
}

// metadataResponder answers Metadata inline with a fresh response.
var metadataResponder = socketserver.HandlerFunc(func(r *socketserver.Request) {
	resp := kmsg.NewPtrMetadataResponse()
	resp.ClusterID = kmsg.StringPtr("bench")
	_ = r.Respond(resp)
})

// BenchmarkHotPath: one connection, ApiVersions v3 answered by the server
// itself over loopback: read, decode, encode, write.
func BenchmarkHotPath(b *testing.B) {
	srv := socketservertest.NewServer(b, nil, withAPIs, metadataResponder)
	bc := newBenchClient(socketservertest.Dial(b, srv, "PLAINTEXT"), apiVersionsReq(3, "bench", "1.0"))
	b.ReportAllocs()
	for b.Loop() {
		if err := bc.roundTrip(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRoundTripMetadata: one connection, Metadata v12 through the
// request channel to a handler that responds inline.
func BenchmarkRoundTripMetadata(b *testing.B) {
	srv := socketservertest.NewServer(b, nil, withAPIs, metadataResponder)
	bc := newBenchClient(socketservertest.Dial(b, srv, "PLAINTEXT"), metadataReq(12))
	b.ReportAllocs()
	for b.Loop() {
		if err := bc.roundTrip(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPipelined8: 8 connections in parallel, each keeping two
// Metadata v12 requests outstanding (the next is written before the
// previous answer is read), through the handler.
func BenchmarkPipelined8(b *testing.B) {
	const conns = 8
	srv := socketservertest.NewServer(b, nil, withAPIs, metadataResponder)
	addr := srv.Addr("PLAINTEXT").String()
	b.SetParallelism((conns + runtimeProcs() - 1) / runtimeProcs())
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		bc := newBenchClient(c, metadataReq(12))
		if err := bc.write(); err != nil {
			b.Error(err)
			return
		}
		for pb.Next() {
			if err := bc.write(); err != nil {
				b.Error(err)
				return
			}
			if err := bc.read(); err != nil {
				b.Error(err)
				return
			}
		}
		if err := bc.read(); err != nil {
			b.Error(err)
		}
	})
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

// BenchmarkRoundTripMetadataHooks is BenchmarkRoundTripMetadata with a
// hook implementing every hook interface (doing nothing): what the hook
// calls and the latency stamps cost.
func BenchmarkRoundTripMetadataHooks(b *testing.B) {
	srv := socketservertest.NewServer(b, nil, withHooks(nopHooks{}), metadataResponder)
	bc := newBenchClient(socketservertest.Dial(b, srv, "PLAINTEXT"), metadataReq(12))
	b.ReportAllocs()
	for b.Loop() {
		if err := bc.roundTrip(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkProduce1MiB: one connection sending Produce requests of a
// little over 1 MiB (one batch of a 1 MiB record, as kgo sends them), one
// in flight, answered inline, with the example broker's request-memory
// budget (twice socket.request.max.bytes). SetBytes makes the result MB/s.
func BenchmarkProduce1MiB(b *testing.B) {
	srv := socketservertest.NewServer(b, config.Properties{"queued.max.request.bytes": "209715200"}, func(c *socketserver.Config) {
		c.APIs = socketserver.Inline(socketserver.HandlerFunc(func(r *socketserver.Request) {
			_ = r.Respond(r.Body.(*kmsg.ProduceRequest).ResponseKind())
		}), mustKmsgAPI(kmsg.Produce))
	}, answerAll)
	c := socketservertest.Dial(b, srv, "PLAINTEXT")
	bc := newBenchClient(c, produceOf(1<<20+60))
	b.SetBytes(int64(len(bc.req)))
	b.ReportAllocs()
	for b.Loop() {
		if err := bc.roundTrip(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkProduceDecodedVsRaw: one connection sending Produce requests
// (one batch of the size given), one in flight, answered inline with a
// response the host has already: decoded (the server decodes the request
// into kmsg's type and encodes the response), raw (the host gets the
// frame's bytes and answers with the response's bytes), and raw streamed
// (the body is moved through the request's reader, to io.Discard, instead
// of being read into a frame). SetBytes makes the result MB/s.
func BenchmarkProduceDecodedVsRaw(b *testing.B) {
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 9
	encoded := resp.AppendTo(nil)
	handlers := map[string]socketserver.Handler{
		"decoded": socketserver.HandlerFunc(func(r *socketserver.Request) { _ = r.Respond(resp) }),
		"raw": socketserver.HandlerFunc(func(r *socketserver.Request) {
			if r.Raw.Streamed() {
				_, _ = io.Copy(io.Discard, r.Raw)
			}
			_ = r.RespondRaw(encoded)
		}),
	}
	for _, size := range []int{1 << 10, 1 << 20} {
		for _, mode := range []string{"decoded", "raw", "raw-streamed"} {
			b.Run(fmt.Sprintf("%s/%dKiB", mode, size>>10), func(b *testing.B) {
				api := socketserver.KmsgAPI(kmsg.Produce, 3, 12)
				h := handlers[mode]
				switch mode {
				case "raw":
					api = socketserver.Raw(api)[0]
					h = handlers["raw"]
				case "raw-streamed":
					api = socketserver.Raw(api)[0]
					api.StreamAbove = 1
					h = handlers["raw"]
				}
				srv := socketservertest.NewServer(b, config.Properties{"queued.max.request.bytes": "209715200"}, func(c *socketserver.Config) {
					c.APIs = socketserver.Inline(h, api)
				}, answerAll)
				bc := newBenchClient(socketservertest.Dial(b, srv, "PLAINTEXT"), produceOf(size))
				b.SetBytes(int64(len(bc.req)))
				b.ReportAllocs()
				for b.Loop() {
					if err := bc.roundTrip(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
