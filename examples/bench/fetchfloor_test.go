package main

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/socketserver"
)

// TestEncodeFetchByReference checks that a Fetch response with its
// batches by reference is, byte for byte, kmsg's encoding of the response
// with the batches in it, flexible or not; and that other responses are
// kmsg's encoding.
func TestEncodeFetchByReference(t *testing.T) {
	batches := [][]byte{bytes.Repeat([]byte{1}, 300), bytes.Repeat([]byte{2}, 70_000), {3}}
	response := func(version int16, records [][]socketserver.FetchRecords) *kmsg.FetchResponse {
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = version
		for ti, topic := range records {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = "t"+string(rune('a'+ti)), [16]byte{byte(ti)}
			for pi, r := range topic {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.HighWatermark, sp.RecordBatches = int32(pi), 99, bytes.Join(r.Batches, nil)
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
	records := [][]socketserver.FetchRecords{
		{{Batches: batches}, {}, {Batches: batches[2:]}},
		{{Batches: batches[:1]}},
	}
	marker, err := newBatchesMarker()
	if err != nil {
		t.Fatal(err)
	}
	for _, version := range []int16{4, 11, 12, 16, 18} {
		want := response(version, records).AppendTo(nil)
		body, bufs, err := encodeFetchByReference(nil, response(version, records), records, marker)
		if err != nil {
			t.Fatalf("v%d: %v", version, err)
		}
		if got := bytes.Join(bufs, nil); !bytes.Equal(got, want) {
			t.Errorf("v%d: %d bytes written, want kmsg's %d, the same", version, len(got), len(want))
		}
		if len(body) > 1024 {
			t.Errorf("v%d: the body encoded %d bytes: the batches were copied", version, len(body))
		}
	}
	meta := kmsg.NewPtrMetadataResponse()
	meta.Version = 12
	_, bufs, err := encodeFetchByReference(nil, meta, nil, marker)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := bytes.Join(bufs, nil), meta.AppendTo(nil); !bytes.Equal(got, want) {
		t.Errorf("Metadata: %x, want %x", got, want)
	}
}

// TestFetchFloorServesKgo has kgo consume the fetch floor's whole log over
// TCP on 127.0.0.1, checking each record's offset and size.
func TestFetchFloorServesKgo(t *testing.T) {
	for _, c := range []struct {
		records, size int
	}{{3000, 1024}, {5, 1 << 20}} {
		log, err := buildCeilingLog(c.records, c.size, true)
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		done := make(chan error, 1)
		go func() { done <- fetchFloorServe(ctx, ln, log) }()
		cl, err := kgo.NewClient(kgo.SeedBrokers(ln.Addr().String()),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{largeTopic: {0: kgo.NewOffset().At(0)}}))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for got < c.records && ctx.Err() == nil {
			fetches := cl.PollFetches(ctx)
			fetches.EachError(func(topic string, p int32, err error) {
				t.Errorf("%s[%d]: %v", topic, p, err)
			})
			for it := fetches.RecordIter(); !it.Done(); {
				r := it.Next()
				if r.Offset != int64(got) || len(r.Value) != c.size {
					t.Fatalf("record %d: offset %d with %d bytes, want %d bytes", got, r.Offset, len(r.Value), c.size)
				}
				got++
			}
		}
		cl.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the floor: %v", err)
		}
		if got != c.records {
			t.Errorf("%d of %d records of %d bytes consumed", got, c.records, c.size)
		}
	}
}
