package socketserver_test

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// answerAll answers every request with an empty response of its API.
var answerAll = socketserver.HandlerFunc(func(r *socketserver.Request) { _ = respondEmpty(r) })

// frameCorrelationIDs returns the correlation ids of the whole frames at
// the start of b that carry one.
func frameCorrelationIDs(b []byte) []int32 {
	var ids []int32
	for len(b) >= 4 {
		size := int32(binary.BigEndian.Uint32(b))
		if size < 0 || int(size) > len(b)-4 {
			break
		}
		if size >= 8 {
			ids = append(ids, int32(binary.BigEndian.Uint32(b[8:])))
		}
		b = b[4+size:]
	}
	return ids
}

// FuzzServeFrame sends arbitrary bytes, as they come or as one frame, to a
// real server over TCP, then half-closes. The server must neither crash
// nor hang: it answers or closes, and whatever it writes is whole response
// frames answering the frames sent, in order.
func FuzzServeFrame(f *testing.F) {
	fuzzServe(f, socketservertest.NewServer(f, nil, withAPIs, answerAll))
}

// FuzzServeFrameWithBudget is FuzzServeFrame with queued.max.request.bytes
// set, so that frames take their memory from the pool as their bytes
// arrive, and a short stall timeout.
func FuzzServeFrameWithBudget(f *testing.F) {
	fuzzServe(f, socketservertest.NewServer(f, config.Properties{
		"socket.request.max.bytes": "1048576",
		"queued.max.request.bytes": "1048576",
		config.KeyRequestStallMs:   "1000",
	}, withAPIs, answerAll))
}

// FuzzServeFrameRaw is FuzzServeFrameWithBudget with every API but the
// server's own served raw, frames over 64 bytes streamed, the APIs of odd
// keys pipelined (API.Pipeline) and the others served one at a time: the
// host reads each body through the server's reader and answers with bytes
// of its own, or not at all for a Produce with acks=0, and the answers
// must leave in the order of the requests.
func FuzzServeFrameRaw(f *testing.F) {
	fuzzServe(f, socketservertest.NewServer(f, config.Properties{
		"socket.request.max.bytes": "1048576",
		"queued.max.request.bytes": "1048576",
		config.KeyRequestStallMs:   "1000",
	}, func(c *socketserver.Config) {
		c.APIs = rawAPIs(64)
		for i := range c.APIs { // the odd keys (Fetch, Metadata, ...) pipelined, the others one at a time
			if c.APIs[i].Key%2 == 1 {
				c.APIs[i].Pipeline = 4
			}
		}
	}, socketserver.HandlerFunc(func(r *socketserver.Request) {
		if _, err := io.Copy(io.Discard, r.Raw); err != nil {
			_ = r.CloseConnection()
			return
		}
		if !r.Raw.ExpectsResponse() {
			_ = r.NoResponse()
			return
		}
		_ = r.RespondRaw(r.Raw.Header())
	})))
}

// fuzzServe runs FuzzServeFrame's body against srv's PLAINTEXT listener.
func fuzzServe(f *testing.F, srv *socketserver.Server) {
	addr := srv.Addr("PLAINTEXT").String()

	f.Add(requestFrame(metadataReq(9), 1, strp("fuzz")), false)
	f.Add(append(requestFrame(apiVersionsReq(3, "fuzz", "1"), 2, nil), requestFrame(metadataReq(1), 3, strp(""))...), false)
	f.Add(headerBytes(18, 9, 4, strp("c"), []byte{0}), true)
	f.Add([]byte{0, 7, 0, 0, 0, 0, 0, 5, 0, 0, 0, 42}, true)
	f.Add(append(headerBytes(3, 9, 6, strp("t"), []byte{1, 0, 3, 'a', 'b', 'c'}), metadataReq(9).AppendTo(nil)...), true)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1}, false)
	f.Add([]byte{0, 3, 0}, true)
	f.Fuzz(func(t *testing.T, data []byte, wrap bool) {
		if wrap {
			data = frame(data)
		}
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		_, _ = c.Write(data) // the server may already have closed
		_ = c.(*net.TCPConn).CloseWrite()
		got, err := io.ReadAll(c)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the server neither answered nor closed; input %x", data)
		}
		// A reset may cut the last response short; every whole one must
		// answer a frame sent, in order.
		sent := frameCorrelationIDs(data)
		for len(got) >= 4 {
			size := int(binary.BigEndian.Uint32(got))
			if size < 4 {
				t.Fatalf("response frame of %d bytes", size)
			}
			if size > len(got)-4 {
				break
			}
			corr := int32(binary.BigEndian.Uint32(got[4:]))
			for len(sent) > 0 && sent[0] != corr {
				sent = sent[1:]
			}
			if len(sent) == 0 {
				t.Fatalf("response with correlation id %d answers no frame sent, or out of order; input %x", corr, data)
			}
			sent = sent[1:]
			got = got[4+size:]
		}
	})
}
