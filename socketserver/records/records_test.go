package records_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/kafkanet/kafkanet/internal/bindcheck"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/records"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(bindcheck.Wrap(m)) }

// produced is what a Produce handler read with records: per batch, its
// codec and records, or the error.
type produced struct {
	mu      sync.Mutex
	codecs  []kgo.CompressionCodecType
	records []records.Record
	raw     [][]byte // each batch's bytes, copied
	errs    []error
}

// startProduceServer serves Metadata (one topic, "t", of one partition)
// and Produce, reading each partition's records with records.Batches and
// Batch.Records, and answering the partition's error.
func startProduceServer(t *testing.T, got *produced) *socketserver.Server {
	node := socketserver.SingleNode{NodeID: 0, ClusterID: "records", Topics: []socketserver.MetadataTopic{{Name: "t", Partitions: 1}}}
	return socketservertest.NewServerFunc(t, nil, func(c *socketserver.Config) {
		c.APIs = []socketserver.API{
			socketserver.KmsgAPI(kmsg.Metadata, 0, 13),
			socketserver.KmsgAPI(kmsg.Produce, 3, 12),
			socketserver.KmsgAPI(kmsg.InitProducerID, 0, 5),
		}
	}, func(srv *socketserver.Server) socketserver.Handler {
		return socketserver.HandlerFunc(func(r *socketserver.Request) {
			switch req := r.Body.(type) {
			case *kmsg.MetadataRequest:
				_ = r.Respond(srv.SingleNodeMetadata(req, r.Conn.Listener, node))
			case *kmsg.InitProducerIDRequest:
				resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
				resp.ProducerID, resp.ProducerEpoch = 1, 0
				_ = r.Respond(resp)
			case *kmsg.ProduceRequest:
				resp := req.ResponseKind().(*kmsg.ProduceResponse)
				for _, rt := range req.Topics {
					st := kmsg.NewProduceResponseTopic()
					st.Topic = rt.Topic
					for _, rp := range rt.Partitions {
						sp := kmsg.NewProduceResponseTopicPartition()
						sp.Partition = rp.Partition
						sp.ErrorCode = got.read(rp.Records)
						st.Partitions = append(st.Partitions, sp)
					}
					resp.Topics = append(resp.Topics, st)
				}
				_ = r.Respond(resp)
			default:
				_ = r.CloseConnection()
			}
		})
	})
}

func (p *produced) read(b []byte) int16 {
	p.mu.Lock()
	defer p.mu.Unlock()
	for batch, err := range records.Batches(b) {
		if err != nil {
			p.errs = append(p.errs, err)
			return records.ErrorCode(err)
		}
		p.codecs = append(p.codecs, batch.Compression())
		p.raw = append(p.raw, bytes.Clone(batch.Raw))
		for rec, err := range batch.Records() {
			if err != nil {
				p.errs = append(p.errs, err)
				return records.ErrorCode(err)
			}
			rec.Key, rec.Value = bytes.Clone(rec.Key), bytes.Clone(rec.Value)
			p.records = append(p.records, rec)
		}
	}
	return 0
}

// A real kgo producer's batches, with each codec, read back whole: keys,
// values, headers, offsets within the batch and timestamps.
func TestBatchesFromKgo(t *testing.T) {
	for _, tc := range []struct {
		name  string
		codec kgo.CompressionCodec
		want  kgo.CompressionCodecType
	}{
		{"none", kgo.NoCompression(), kgo.CodecNone},
		{"gzip", kgo.GzipCompression(), kgo.CodecGzip},
		{"snappy", kgo.SnappyCompression(), kgo.CodecSnappy},
		{"lz4", kgo.Lz4Compression(), kgo.CodecLz4},
		{"zstd", kgo.ZstdCompression(), kgo.CodecZstd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := &produced{}
			srv := startProduceServer(t, got)
			cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr("PLAINTEXT").String()),
				kgo.ProducerBatchCompression(tc.codec), kgo.DefaultProduceTopic("t"), kgo.ProducerLinger(50*time.Millisecond))
			require.NoError(t, err)
			defer cl.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			start := time.Now().Add(-time.Second)
			var recs []*kgo.Record
			for i := range 20 {
				value := bytes.Repeat([]byte(fmt.Sprintf("value %d ", i)), 20) // compressible
				recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprint("k", i)), Value: value,
					Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(fmt.Sprint(i))}}})
			}
			require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())

			got.mu.Lock()
			defer got.mu.Unlock()
			require.Empty(t, got.errs)
			require.NotEmpty(t, got.codecs)
			for _, c := range got.codecs {
				assert.Equal(t, tc.want, c)
			}
			require.Len(t, got.records, len(recs))
			var offset int64 // offsets count from 0 in each batch
			for i, rec := range got.records {
				if i > 0 && rec.Offset == 0 {
					offset = 0
				}
				assert.Equal(t, offset, rec.Offset, "record %d", i)
				offset++
				assert.Equal(t, recs[i].Key, rec.Key)
				assert.Equal(t, recs[i].Value, rec.Value)
				require.Len(t, rec.Headers, 1)
				assert.Equal(t, "h", rec.Headers[0].Key)
				assert.Equal(t, fmt.Sprint(i), string(rec.Headers[0].Value))
				assert.WithinRange(t, rec.Timestamp, start, time.Now())
			}
		})
	}
}

// A batch that is not whole, not of magic 2, not what its CRC says, or
// whose records are not what it says, is an error with Kafka's code for
// the partition, and stops the iteration.
func TestBatchesRefuse(t *testing.T) {
	good := kgoBatch(t, kgo.GzipCompression())
	plain := kgoBatch(t, kgo.NoCompression())
	withCRC := func(b []byte) []byte {
		binary.BigEndian.PutUint32(b[17:21], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
		return b
	}
	change := func(b []byte, f func([]byte) []byte) []byte { return f(bytes.Clone(b)) }
	for _, tc := range []struct {
		name    string
		records []byte
		code    *kerr.Error
		reason  string
		before  int // records read before the error
	}{
		{"too short", good[:40], kerr.CorruptMessage, "too few", 0},
		{"truncated", good[:len(good)-1], kerr.CorruptMessage, "does not fit", 0},
		{"a second batch truncated", append(bytes.Clone(plain), plain[:70]...), kerr.CorruptMessage, "does not fit", 3},
		{"length too small", change(good, func(b []byte) []byte { binary.BigEndian.PutUint32(b[8:12], 10); return b }),
			kerr.CorruptMessage, "length 10", 0},
		{"magic 1", change(good, func(b []byte) []byte { b[16] = 1; return b }), kerr.InvalidRecord, "magic 1", 0},
		{"a flipped byte", change(good, func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), kerr.CorruptMessage, "CRC-32C", 0},
		{"garbage compressed", change(good, func(b []byte) []byte {
			for i := 61; i < len(b); i++ {
				b[i] = 0xff
			}
			return withCRC(b)
		}), kerr.CorruptMessage, "decompressing", 0},
		{"more records than it holds", change(plain, func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[57:61], 4)
			return withCRC(b)
		}), kerr.CorruptMessage, "record 3 of 4", 3},
		{"fewer records than it holds", change(plain, func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[57:61], 2)
			return withCRC(b)
		}), kerr.InvalidRecord, "after the 2 records", 2},
		{"unknown codec", change(plain, func(b []byte) []byte { b[22] |= 7; return withCRC(b) }), kerr.CorruptMessage, "codec 7", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			var err error
			for _, err = range records.All(tc.records) {
				if err != nil {
					break
				}
				n++
			}
			require.Error(t, err)
			assert.True(t, errors.Is(err, tc.code), "%v is not %v", err, tc.code)
			assert.Equal(t, tc.code.Code, records.ErrorCode(err))
			assert.Contains(t, err.Error(), tc.reason)
			assert.Equal(t, tc.before, n)
		})
	}
	t.Run("empty", func(t *testing.T) {
		for range records.All(nil) {
			t.Fatal("records of nothing")
		}
	})
	assert.Equal(t, int16(0), records.ErrorCode(nil))
	assert.Equal(t, kerr.CorruptMessage.Code, records.ErrorCode(errors.New("other")))
}

// kgoBatch returns one record batch of three records as kgo produces it
// with codec, through a server that keeps it.
func kgoBatch(t *testing.T, codec kgo.CompressionCodec) []byte {
	t.Helper()
	got := &produced{}
	srv := startProduceServer(t, got)
	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr("PLAINTEXT").String()),
		kgo.ProducerBatchCompression(codec), kgo.DefaultProduceTopic("t"), kgo.ProducerLinger(time.Second))
	require.NoError(t, err)
	defer cl.Close()
	var recs []*kgo.Record
	for i := range 3 {
		recs = append(recs, &kgo.Record{Value: bytes.Repeat([]byte{'a' + byte(i)}, 100)})
	}
	require.NoError(t, cl.ProduceSync(t.Context(), recs...).FirstErr())
	got.mu.Lock()
	defer got.mu.Unlock()
	require.Len(t, got.raw, 1)
	return got.raw[0]
}
