package socketserver_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// On Linux a plaintext connection reads and writes its socket with raw
// system calls, which do not wake the Go runtime's monitor thread (see
// rawSocket): a consumer's Fetch requests, one after another, cost none of
// its wake-ups. Counted without a clock, per request: the request arrives
// in one raw read, and the response leaves in one raw writev of all its
// pieces (one per 1,024 pieces, IOV_MAX) when the socket's buffer takes
// it; a read or write through net.Conn is not counted, and fails the
// counts. After the connection parked and woke, the same (the parked
// goroutine's read of the first bytes is through net.Conn).
func TestRawSocketCallsPerRequest(t *testing.T) {
	reads, writes, restore := socketserver.CountRawCalls()
	t.Cleanup(restore) // after the server has closed

	// Responses of a few KB, 20 of each: the socket's send buffer (SO_SNDBUF
	// 102,400, Kafka's default, which Linux doubles) takes them all, even
	// if the client's acknowledgements lag, so that no write waits.
	batch := bytes.Repeat([]byte{'r'}, 1000)
	tiny := make([][]byte, 1500)
	for i := range tiny {
		tiny[i] = []byte{byte(i)}
	}
	// A Fetch of one partition of topic, answered with batches by
	// reference.
	fetch := func(topic string, batches [][]byte) (*kmsg.FetchRequest, *socketserver.FetchResponse) {
		req := kmsg.NewPtrFetchRequest()
		req.Version = 12
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rt.Partitions = []kmsg.FetchRequestTopicPartition{kmsg.NewFetchRequestTopicPartition()}
		req.Topics = []kmsg.FetchRequestTopic{rt}
		resp := &socketserver.FetchResponse{FetchResponse: kmsg.NewPtrFetchResponse()}
		resp.Version = req.Version
		st := kmsg.NewFetchResponseTopic()
		st.Topic = topic
		st.Partitions = []kmsg.FetchResponseTopicPartition{kmsg.NewFetchResponseTopicPartition()}
		resp.Topics = []kmsg.FetchResponseTopic{st}
		resp.Records = [][]socketserver.FetchRecords{{{Batches: batches}}}
		return req, resp
	}
	oneReq, oneResp := fetch("three", [][]byte{batch, batch, batch})
	manyReq, manyResp := fetch("many", tiny)
	metadata := kmsg.NewPtrMetadataResponse()
	h := socketserver.HandlerFunc(func(r *socketserver.Request) {
		switch req := r.Body.(type) {
		case *kmsg.FetchRequest:
			if req.Topics[0].Topic == "many" {
				_ = r.Respond(manyResp)
			} else {
				_ = r.Respond(oneResp)
			}
		default:
			_ = r.Respond(metadata)
		}
	})
	srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) {
		c.APIs = socketserver.Inline(h, socketserver.KmsgAPI(kmsg.Fetch, 4, 12), socketserver.KmsgAPI(kmsg.Metadata, 0, 12))
		c.ParkAfter = 20 * time.Millisecond
	}, h)

	for _, tt := range []struct {
		name   string
		req    kmsg.Request
		n      int64 // requests
		writes int64 // per request, exactly
		park   bool  // each request after the connection parked (a connection that wakes soon parks later each time: a few)
	}{
		{"Fetch, records by reference, 5 pieces", oneReq, 20, 1, false},
		{"Fetch, 1,500 batches: 1,502 pieces", manyReq, 20, 2, false},
		{"Metadata", metadataReq(12), 20, 1, false},
		{"Fetch after the connection parked", oneReq, 3, 1, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bc := newBenchClient(socketservertest.Dial(t, srv, "PLAINTEXT"), tt.req)
			if err := bc.roundTrip(); err != nil {
				t.Fatal(err)
			}
			r0, w0 := reads(), writes()
			n := tt.n
			for range n {
				if tt.park {
					waitParked(t, srv, 1)
				}
				if err := bc.roundTrip(); err != nil {
					t.Fatal(err)
				}
			}
			r, w := reads()-r0, writes()-w0
			if w != n*tt.writes {
				t.Errorf("%d raw writes for %d responses, want %d each", w, n, tt.writes)
			}
			if r != n {
				t.Errorf("%d raw reads of bytes for %d requests, want 1 each", r, n)
			}
			t.Logf("%d requests: %d raw reads, %d raw writes", n, r, w)
		})
	}
}
