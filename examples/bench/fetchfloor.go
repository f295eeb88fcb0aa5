package main

// The protocol floor of consuming (scenario g), a child: the least a
// server of the Kafka protocol does to serve kgo's consumer. A goroutine
// per connection and no library: each request is read through a 4 KiB
// buffered reader, decoded with kmsg, and answered at once from the same
// log as the ceilings, Fetch with the log's batches by reference in one
// writev. floor-write sends the same bytes with no protocol at all; what
// this floor pays above it is what answering kgo costs any server.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/socketserver"
)

// maxFetchFloorFrame is the largest request the fetch floor reads: kgo's
// consumer sends small ones.
const maxFetchFloorFrame = 1 << 20

// newBatchesMarker returns a marker to stand in a Fetch response's
// records while it is encoded (see encodeFetchByReference): random bytes,
// so that no client's topic name holds it. The index of the partition's
// records follows it.
func newBatchesMarker() ([]byte, error) {
	marker := make([]byte, 16)
	if _, err := rand.Read(marker); err != nil {
		return nil, fmt.Errorf("the fetch floor's marker: %w", err)
	}
	return marker, nil
}

// serveFetchFloor runs the fetch floor until ctx ends.
func serveFetchFloor(ctx context.Context, spec childSpec) error {
	log, churn, err := childLog(spec, true)
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(churn)
	ln, err := net.Listen("tcp", spec.Addr)
	if err != nil {
		return err
	}
	return fetchFloorServe(ctx, ln, log)
}

// fetchFloorServe serves log on ln until ctx ends.
func fetchFloorServe(ctx context.Context, ln net.Listener, log *ceilingLog) error {
	h := &ceilingHandler{ctx: ctx, log: log}
	var err error
	if h.metadata, err = ceilingMetadata(ln.Addr().String()); err != nil {
		ln.Close()
		return err
	}
	marker, err := newBatchesMarker()
	if err != nil {
		ln.Close()
		return err
	}
	return acceptEach(ctx, ln, func(c net.Conn) { fetchFloorConn(ctx, c, h, marker) })
}

// fetchFloorConn answers the requests of c, one at a time, until it
// closes or sends a request the floor does not answer.
func fetchFloorConn(ctx context.Context, c net.Conn, h *ceilingHandler, marker []byte) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 4096)
	var frame, body []byte
	var headBuf [9]byte // size, correlation id, tags
	for {
		var err error
		if frame, err = readRequestFrame(br, frame); err != nil {
			return
		}
		req, correlationID, err := decodeRequest(frame)
		if err != nil {
			return
		}
		resp, records := answerFetchFloor(ctx, h, req)
		if resp == nil {
			return
		}
		resp.SetVersion(req.GetVersion())
		var bufs net.Buffers
		if body, bufs, err = encodeFetchByReference(body[:0], resp, records, marker); err != nil {
			return
		}
		head := headBuf[:8]
		binary.BigEndian.PutUint32(head[4:], uint32(correlationID))
		if resp.IsFlexible() && resp.Key() != kmsg.ApiVersions.Int16() {
			head = append(head, 0) // the response header's tags
		}
		size := len(head) - 4
		for _, b := range bufs {
			size += len(b)
		}
		binary.BigEndian.PutUint32(head, uint32(size))
		bufs = append(net.Buffers{head}, bufs...)
		if _, err := bufs.WriteTo(c); err != nil {
			return
		}
	}
}

// readRequestFrame reads one request frame from br into buf, reused when
// large enough, and returns it without its size.
func readRequestFrame(br *bufio.Reader, buf []byte) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(br, size[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(size[:]))
	if n < 8 || n > maxFetchFloorFrame {
		return nil, fmt.Errorf("a frame of %d bytes", n)
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	_, err := io.ReadFull(br, buf)
	return buf, err
}

// decodeRequest decodes a request frame (without its size): its header,
// then its body with kmsg.
func decodeRequest(frame []byte) (kmsg.Request, int32, error) {
	key, version := int16(binary.BigEndian.Uint16(frame)), int16(binary.BigEndian.Uint16(frame[2:]))
	correlationID := int32(binary.BigEndian.Uint32(frame[4:]))
	req := kmsg.RequestForKey(key)
	if req == nil {
		return nil, 0, fmt.Errorf("API key %d", key)
	}
	req.SetVersion(version)
	rest := frame[8:]
	if len(rest) < 2 {
		return nil, 0, errors.New("no client id")
	}
	if n := int16(binary.BigEndian.Uint16(rest)); n > 0 {
		if len(rest) < 2+int(n) {
			return nil, 0, errors.New("a client id past the frame")
		}
		rest = rest[2+int(n):]
	} else {
		rest = rest[2:]
	}
	if req.IsFlexible() { // the header's tagged fields
		tags, n := binary.Uvarint(rest)
		if n <= 0 {
			return nil, 0, errors.New("bad header tags")
		}
		rest = rest[n:]
		for ; tags > 0; tags-- {
			_, n := binary.Uvarint(rest)
			if n <= 0 {
				return nil, 0, errors.New("bad header tag")
			}
			size, m := binary.Uvarint(rest[n:])
			if m <= 0 || uint64(len(rest)-n-m) < size {
				return nil, 0, errors.New("bad header tag")
			}
			rest = rest[n+m+int(size):]
		}
	}
	if err := req.ReadFrom(rest); err != nil {
		return nil, 0, fmt.Errorf("%s v%d: %w", kmsg.NameForKey(key), version, err)
	}
	return req, correlationID, nil
}

// fetchFloorAPIs are the versions the fetch floor answers: the ceilings'.
var fetchFloorAPIs = []struct {
	key      kmsg.Key
	min, max int16
}{{kmsg.ApiVersions, 0, 3}, {kmsg.Metadata, 0, 12}, {kmsg.ListOffsets, 1, 6}, {kmsg.Fetch, 4, 18}}

// answerFetchFloor answers req as the ceilings do, with a Fetch
// response's records apart from it (by topic, then partition); a nil
// response for a request it does not answer.
func answerFetchFloor(ctx context.Context, h *ceilingHandler, req kmsg.Request) (kmsg.Response, [][]socketserver.FetchRecords) {
	switch r := req.(type) {
	case *kmsg.ApiVersionsRequest:
		resp := kmsg.NewPtrApiVersionsResponse()
		for _, a := range fetchFloorAPIs {
			k := kmsg.NewApiVersionsResponseApiKey()
			k.ApiKey, k.MinVersion, k.MaxVersion = a.key.Int16(), a.min, a.max
			resp.ApiKeys = append(resp.ApiKeys, k)
		}
		return resp, nil
	case *kmsg.MetadataRequest:
		m := *h.metadata
		return &m, nil
	case *kmsg.ListOffsetsRequest:
		return h.listOffsets(r), nil
	case *kmsg.FetchRequest:
		f, size := h.fetch(r)
		if size == 0 && r.MaxWaitMillis > 0 {
			// At the end of the log, as the ceilings: answer when the wait
			// is over.
			t := time.NewTimer(time.Duration(r.MaxWaitMillis) * time.Millisecond)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, nil
			}
		}
		return f.FetchResponse, f.Records
	}
	return nil, nil
}

// encodeFetchByReference encodes resp's body after dst and returns it,
// and the pieces to write: the body, with each partition's record batches
// of records (a Fetch response's, by topic and partition; nil for any
// other response) in place by reference, where the encoding held marker
// and the partition's index. It fails if a marker is not found.
func encodeFetchByReference(dst []byte, resp kmsg.Response, records [][]socketserver.FetchRecords, marker []byte) ([]byte, net.Buffers, error) {
	fetch, ok := resp.(*kmsg.FetchResponse)
	if !ok || len(records) == 0 {
		dst = resp.AppendTo(dst)
		return dst, net.Buffers{dst}, nil
	}
	var with [][][]byte // the batches of each marked partition, in order
	for t, topic := range records {
		for p, r := range topic {
			if len(r.Batches) == 0 {
				continue
			}
			fetch.Topics[t].Partitions[p].RecordBatches = binary.BigEndian.AppendUint32(bytes.Clone(marker), uint32(len(with)))
			with = append(with, r.Batches)
		}
	}
	dst = fetch.AppendTo(dst)
	bufs := make(net.Buffers, 0, 2+3*len(with))
	lengths := make([]byte, 0, binary.MaxVarintLen32*len(with))
	// The bytes of a marker's length prefix: an int32, or for a flexible
	// version compact bytes, the length plus one as a uvarint.
	markLen, prefix := len(marker)+4, 4
	if fetch.IsFlexible() {
		var b [binary.MaxVarintLen64]byte
		prefix = binary.PutUvarint(b[:], uint64(markLen+1))
	}
	pos := 0
	for i, batches := range with {
		mark := binary.BigEndian.AppendUint32(bytes.Clone(marker), uint32(i))
		found := bytes.Index(dst[pos:], mark)
		if found < prefix {
			return nil, nil, fmt.Errorf("the records of partition %d are not where the encoding put them", i)
		}
		at := pos + found
		size := 0
		for _, b := range batches {
			size += len(b)
		}
		from := len(lengths)
		if fetch.IsFlexible() {
			lengths = binary.AppendUvarint(lengths, uint64(size+1))
		} else {
			lengths = binary.BigEndian.AppendUint32(lengths, uint32(size))
		}
		bufs = append(bufs, dst[pos:at-prefix])
		bufs = append(bufs, lengths[from:])
		bufs = append(bufs, batches...)
		pos = at + len(mark)
	}
	return dst, append(bufs, dst[pos:]), nil
}
