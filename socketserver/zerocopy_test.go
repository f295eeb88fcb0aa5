package socketserver_test

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"runtime"
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

// fetchFixture is a partition's records: several batches in memory, and
// the same bytes in a file.
type fetchFixture struct {
	batches [][]byte
	joined  []byte
	file    *os.File
}

func newFetchFixture(t *testing.T, sizes ...int) *fetchFixture {
	f := &fetchFixture{}
	for i, n := range sizes {
		b := bytes.Repeat([]byte{byte('a' + i)}, n)
		f.batches = append(f.batches, b)
		f.joined = append(f.joined, b...)
	}
	path := filepath.Join(t.TempDir(), "partition.log")
	require.NoError(t, os.WriteFile(path, append([]byte("HEADER"), f.joined...), 0o600))
	file, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { file.Close() })
	f.file = file
	return f
}

// fetchAnswer builds the response the tests expect for a Fetch of one
// partition, and with records by reference when byFile says where from.
func fetchAnswer(req *kmsg.FetchRequest, fx *fetchFixture, mode string) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.Version = req.Version
	resp.SessionID = 7
	for _, rt := range req.Topics {
		t := kmsg.NewFetchResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		p := kmsg.NewFetchResponseTopicPartition()
		p.HighWatermark, p.LastStableOffset, p.LogStartOffset = 42, 42, 3
		p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = 1, 5
		t.Partitions = append(t.Partitions, p)
		resp.Topics = append(resp.Topics, t)
	}
	var recs socketserver.FetchRecords
	switch mode {
	case "kmsg":
		resp.Topics[0].Partitions[0].RecordBatches = fx.joined
		return resp
	case "memory":
		recs = socketserver.FetchRecords{Batches: fx.batches}
	case "file":
		recs = socketserver.FetchRecords{File: fx.file, Offset: int64(len("HEADER")), Length: int64(len(fx.joined))}
	}
	return &socketserver.FetchResponse{FetchResponse: resp, Records: [][]socketserver.FetchRecords{{recs}}}
}

// A Fetch answered with records by reference, from memory (writev) or a
// file (sendfile), is on the wire exactly what kmsg encodes for the same
// response, at every Fetch version, on plaintext and TLS listeners: with a
// few batches, some larger than the socket takes at once, and with more
// batches than one writev takes (1,024).
func TestFetchRecordsByReference(t *testing.T) {
	pki := newTestPKI(t)
	many := make([]int, 2500)
	for i := range many {
		many[i] = 1 + i%3
	}
	fixtures := map[string]*fetchFixture{"few": newFetchFixture(t, 100, 70000, 3, 200000), "many": newFetchFixture(t, many...)}
	mode := make(chan string, 1)
	handler := socketserver.HandlerFunc(func(r *socketserver.Request) {
		req := r.Body.(*kmsg.FetchRequest)
		name := req.Topics[0].Topic
		if req.Version >= 13 { // topic ids, no names
			name = string(bytes.TrimRight(req.Topics[0].TopicID[:], "\x00"))
		}
		require.NoError(t, r.Respond(fetchAnswer(req, fixtures[name], <-mode)))
	})
	srv := socketservertest.NewServer(t, merge(config.Properties{
		"listeners":                      "PLAIN://127.0.0.1:0,TLS://127.0.0.1:0",
		"listener.security.protocol.map": "PLAIN:PLAINTEXT,TLS:SSL",
		"inter.broker.listener.name":     "PLAIN",
	}, pki.props("")), func(c *socketserver.Config) { c.APIs = allAPIs() }, handler)

	for _, l := range []string{"PLAIN", "TLS"} {
		var c net.Conn = socketservertest.Dial(t, srv, protocolmap.ListenerName(l))
		if l == "TLS" {
			c = tls.Client(c, pki.clientConfig())
		}
		corr := int32(0)
		frameFor := func(req *kmsg.FetchRequest, m string) []byte {
			corr++
			mode <- m
			send(t, c, req, corr)
			return readRawFrame(t, c)
		}
		for v := int16(4); v <= kmsg.NewPtrFetchRequest().MaxVersion(); v++ {
			for _, name := range []string{"few", "many"} {
				req := kmsg.NewPtrFetchRequest()
				req.Version = v
				rt := kmsg.NewFetchRequestTopic()
				rt.Topic = name
				copy(rt.TopicID[:], name)
				rt.Partitions = []kmsg.FetchRequestTopicPartition{kmsg.NewFetchRequestTopicPartition()}
				req.Topics = []kmsg.FetchRequestTopic{rt}
				want := frameFor(req, "kmsg")
				for _, m := range []string{"memory", "file"} {
					got := frameFor(req, m)
					if !bytes.Equal(want[4:], got[4:]) { // all but the correlation id
						t.Fatalf("%s, Fetch v%d, %s batches from %s: %d bytes on the wire, want kmsg's %d", l, v, name, m, len(got), len(want))
					}
				}
			}
		}
	}
}

// Records by reference cost the server no copy: answering with 16 MiB of
// record batches, from memory or from a file, allocates a small fraction
// of that on a plaintext listener.
func TestFetchRecordsByReferenceDoNotCopy(t *testing.T) {
	const size = 16 << 20
	fx := newFetchFixture(t, size/2, size/2)
	mode := make(chan string, 1)
	srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) { c.APIs = allAPIs() },
		socketserver.HandlerFunc(func(r *socketserver.Request) {
			require.NoError(t, r.Respond(fetchAnswer(r.Body.(*kmsg.FetchRequest), fx, <-mode)))
		}))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "t"
	rt.Partitions = []kmsg.FetchRequestTopicPartition{kmsg.NewFetchRequestTopicPartition()}
	req.Topics = []kmsg.FetchRequestTopic{rt}
	sink := make([]byte, 64<<10)
	for i, m := range []string{"memory", "file", "kmsg"} {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		mode <- m
		send(t, c, req, int32(i))
		var hdr [4]byte
		_, err := c.Read(hdr[:]) // a frame of over 16 MiB, read and dropped as it comes
		require.NoError(t, err)
		left := int(binary.BigEndian.Uint32(hdr[:]))
		require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second)))
		for left > 0 {
			n, err := c.Read(sink[:min(left, len(sink))])
			require.NoError(t, err)
			left -= n
		}
		runtime.ReadMemStats(&after)
		allocated := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s: %d KiB allocated for a response of %d MiB", m, allocated>>10, size>>20)
		if m == "kmsg" {
			assert.Greater(t, allocated, uint64(size), "encoding the records into the buffer copies them")
		} else {
			assert.Less(t, allocated, uint64(size/16), "records by reference from %s were copied", m)
		}
	}
}

// A FetchResponse whose Records do not fit its partitions is refused, and
// the request stays unanswered for the host to answer otherwise.
func TestFetchRecordsMismatchRefused(t *testing.T) {
	resp := kmsg.NewPtrFetchResponse()
	got := make(chan error, 1)
	srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) { c.APIs = allAPIs() },
		socketserver.HandlerFunc(func(r *socketserver.Request) {
			got <- r.Respond(&socketserver.FetchResponse{FetchResponse: resp, Records: [][]socketserver.FetchRecords{{{Batches: [][]byte{{1}}}}}})
			_ = r.Respond(kmsg.NewPtrFetchResponse())
		}))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	send(t, c, req, 1)
	require.ErrorIs(t, <-got, socketserver.ErrFetchRecords)
	r := kmsg.NewPtrFetchResponse()
	r.Version = 12
	readResponse(t, c, r, 1)
}
