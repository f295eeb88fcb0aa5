package socketserver

import (
	"bufio"
	"bytes"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkDecodePath measures what the connection goroutine does with a
// frame before queueing it: read the frame, parse the header, look the API
// up, skip header tags and decode the body (Metadata v12, two topics).
func BenchmarkDecodePath(b *testing.B) {
	api := KmsgAPI(kmsg.Metadata, 0, 12)
	table, err := newAPITable([]API{api})
	if err != nil {
		b.Fatal(err)
	}
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	for _, name := range []string{"orders", "payments"} {
		topic := kmsg.NewMetadataRequestTopic()
		topic.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, topic)
	}
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench")).AppendRequest(nil, req, 1)
	src := bytes.NewReader(frame)
	br := bufio.NewReaderSize(src, 4096)
	var sizeBuf [4]byte
	b.ReportAllocs()
	for b.Loop() {
		src.Reset(frame)
		br.Reset(src)
		f, err := readFrame(br, &sizeBuf, DefaultRequestMaxBytes)
		if err != nil {
			b.Fatal(err)
		}
		h, rest, err := parseHeaderPrefix(f)
		if err != nil {
			b.Fatal(err)
		}
		a, ok := table.lookup(h.key)
		if !ok {
			b.Fatal("lookup")
		}
		body := a.New()
		body.SetVersion(h.version)
		if body.IsFlexible() {
			if rest, err = skipTags(rest); err != nil {
				b.Fatal(err)
			}
		}
		if err := body.ReadFrom(rest); err != nil {
			b.Fatal(err)
		}
		runtime.KeepAlive(body)
	}
}

// BenchmarkParseHeaderPrefix parses a request header v2 (client id and
// tags) as every frame's first step.
func BenchmarkParseHeaderPrefix(b *testing.B) {
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench-client")).AppendRequest(nil, kmsg.NewPtrMetadataRequest(), 1)[4:]
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := parseHeaderPrefix(frame); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseClientSoftware parses the KIP-511 fields of an ApiVersions
// v3 body, which the server does without kmsg.
func BenchmarkParseClientSoftware(b *testing.B) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "kgo", "v1.20.0"
	body := req.AppendTo(nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := parseClientSoftware(body); err != nil {
			b.Fatal(err)
		}
	}
}
