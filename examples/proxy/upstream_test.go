package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A forwarded request is framed as a Kafka client frames it: kmsg's own
// formatter gives the same bytes for every API and version, with a client
// id and (header v0 aside, which no forwarded API uses) without one.
func TestAppendRequestFramesAsKafkaClients(t *testing.T) {
	id := "client-7"
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID(id))
	fNull := kmsg.NewRequestFormatter()
	for key := int16(0); key < 100; key++ {
		req := kmsg.RequestForKey(key)
		if req == nil || key == int16(kmsg.ControlledShutdown) {
			continue
		}
		for v := int16(0); v <= req.MaxVersion(); v++ {
			req.SetVersion(v)
			assert.Equal(t, f.AppendRequest(nil, req, 42), appendRequest(nil, req, 42, &id), "%s v%d", kmsg.NameForKey(key), v)
			assert.Equal(t, fNull.AppendRequest(nil, req, 43), appendRequest(nil, req, 43, nil), "%s v%d, null client id", kmsg.NameForKey(key), v)
		}
	}
}

// responseFrame encodes resp as a broker frames it: correlation id, a tag
// section for flexible versions (not for ApiVersions), body.
func responseFrame(resp kmsg.Response, corr int32) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(corr))
	if resp.IsFlexible() && resp.Key() != int16(kmsg.ApiVersions) {
		b = append(b, 0)
	}
	return resp.AppendTo(b)
}

func TestDecodeResponse(t *testing.T) {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 12
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = 1, "h", 9
	resp.Brokers = append(resp.Brokers, b)
	frame := responseFrame(resp, 5)

	got, err := decodeResponse(req, 5, frame)
	require.NoError(t, err)
	assert.Equal(t, "h", got.(*kmsg.MetadataResponse).Brokers[0].Host)

	_, err = decodeResponse(req, 6, frame)
	assert.ErrorIs(t, err, errUpstreamResponse, "a wrong correlation id")
	_, err = decodeResponse(req, 5, frame[:len(frame)-3])
	assert.ErrorIs(t, err, errUpstreamResponse, "a truncated body")
	_, err = decodeResponse(req, 5, []byte{0, 0, 0, 5, 0x80})
	assert.ErrorIs(t, err, errUpstreamResponse, "a bad header tag section")

	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	avResp := kmsg.NewPtrApiVersionsResponse()
	avResp.Version = 3
	got, err = decodeResponse(av, 1, responseFrame(avResp, 1))
	require.NoError(t, err, "ApiVersions' response header has no tags, even when flexible")
	assert.Equal(t, int16(3), got.GetVersion())
}

// A peer that announces a frame of 1 GiB and sends 10 bytes costs a
// fraction of it; sizes out of bounds are refused before any allocation.
func TestReadFrameAllocatesWhatArrives(t *testing.T) {
	claim := append(binary.BigEndian.AppendUint32(nil, 1<<30), make([]byte, 10)...)
	var err error
	r := bytes.NewReader(claim)
	// AllocsPerRun counts the whole process's allocations: averaged over
	// runs, a stray one from another test's goroutine does not count.
	allocs := testing.AllocsPerRun(50, func() {
		r.Reset(claim)
		_, err = readFrame(r, maxResponseBytes)
	})
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.LessOrEqual(t, allocs, 2.0)
	var ms [2]uint64
	ms[0] = heapAlloc()
	_, _ = readFrame(bytes.NewReader(claim), maxResponseBytes)
	ms[1] = heapAlloc()
	assert.Less(t, ms[1]-min(ms[0], ms[1]), uint64(8<<20), "reading a claimed 1 GiB frame allocated too much")

	for _, size := range []uint32{0, 3, 1<<30 + 1, 0xffffffff} {
		_, err := readFrame(bytes.NewReader(binary.BigEndian.AppendUint32(nil, size)), maxResponseBytes)
		assert.ErrorIs(t, err, errUpstreamResponse, "size %d", size)
	}
	// A frame larger than one step is read whole.
	big := make([]byte, 3<<20+5)
	big[len(big)-1] = 7
	frame, err := readFrame(bytes.NewReader(append(binary.BigEndian.AppendUint32(nil, uint32(len(big))), big...)), maxResponseBytes)
	require.NoError(t, err)
	assert.Equal(t, big, frame)
}

// FuzzUpstreamResponse feeds arbitrary bytes as an upstream broker's
// response to every forwarded API at any version: decoding and rewriting
// never panic, and a frame that decodes is rewritten to the proxy's
// addresses.
func FuzzUpstreamResponse(f *testing.F) {
	for _, seed := range []struct {
		resp kmsg.Response
		v    int16
	}{
		{kmsg.NewPtrMetadataResponse(), 12}, {kmsg.NewPtrFindCoordinatorResponse(), 3}, {kmsg.NewPtrFindCoordinatorResponse(), 5},
		{kmsg.NewPtrDescribeClusterResponse(), 1}, {kmsg.NewPtrProduceResponse(), 11}, {kmsg.NewPtrFetchResponse(), 17},
	} {
		seed.resp.SetVersion(seed.v)
		f.Add(seed.resp.Key(), seed.v, responseFrame(seed.resp, 1))
	}
	meta := kmsg.NewPtrMetadataResponse()
	meta.Version = 1
	meta.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 0, Host: "upstream", Port: 9092}, {NodeID: 7, Host: "upstream", Port: 9099}}
	f.Add(int16(kmsg.Metadata), int16(1), responseFrame(meta, 1))
	f.Fuzz(func(t *testing.T, key, version int16, frame []byte) {
		req := kmsg.RequestForKey(key)
		if req == nil || version < 0 || version > req.MaxVersion() || len(frame) < 4 {
			return
		}
		req.SetVersion(version)
		resp, err := decodeResponse(req, int32(binary.BigEndian.Uint32(frame)), frame)
		if err != nil {
			if !errors.Is(err, errUpstreamResponse) {
				t.Fatalf("error %v does not wrap errUpstreamResponse", err)
			}
			return
		}
		rewrite(resp, "PLAIN", &fakeBook{})
		if m, ok := resp.(*kmsg.MetadataResponse); ok {
			for _, b := range m.Brokers {
				if b.Host != "proxy.example" {
					t.Fatalf("an upstream address survived: %+v", b)
				}
			}
		}
	})
}

// FuzzRawAnswerHead feeds arbitrary bytes as the head of an answer to a
// raw request (size, correlation id, and for a flexible version the tag
// count) and what follows it: parsing the head and skipping the header's
// tags never panic, and a head that parses announces a body within the
// limit.
func FuzzRawAnswerHead(f *testing.F) {
	f.Add(true, []byte{0, 0, 0, 5, 0, 0, 0, 7, 0}, []byte{})
	f.Add(false, []byte{0, 0, 0, 9, 0, 0, 0, 7, 1}, []byte{1, 2, 3, 4, 5})
	f.Add(true, []byte{0, 0, 0, 12, 0, 0, 0, 7, 1}, []byte{0, 2, 9, 9, 1, 2, 3, 4})
	f.Add(true, []byte{0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 7, 0x80}, []byte{0x80, 0x80})
	f.Fuzz(func(t *testing.T, flexible bool, head, rest []byte) {
		n := 8
		if flexible {
			n = maxHead
		}
		if len(head) < n {
			return
		}
		head = head[:n]
		body, tagged, err := parseHead(head, 7)
		if err != nil {
			if !errors.Is(err, errUpstreamResponse) {
				t.Fatalf("error %v does not wrap errUpstreamResponse", err)
			}
			return
		}
		if body < 0 || body > maxResponseBytes {
			t.Fatalf("a body of %d bytes", body)
		}
		if tagged != (flexible && head[8] != 0) {
			t.Fatalf("tagged %v for head %x", tagged, head)
		}
		if tagged {
			b := append([]byte{head[8]}, rest...)
			if skip, err := skipTags(b); err == nil && (skip < 1 || skip > len(b)) {
				t.Fatalf("skipTags skipped %d of %d bytes", skip, len(b))
			}
		}
	})
}

func heapAlloc() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
