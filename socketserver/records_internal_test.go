package socketserver

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// materialize joins an encoded response's bytes and its records, as they
// go on the wire.
func materialize(t testing.TB, s segmented) []byte {
	t.Helper()
	var out []byte
	prev := 0
	for _, c := range s.cuts {
		out = append(out, s.buf[prev:c.at]...)
		if c.records.File != nil {
			b := make([]byte, c.records.Length)
			_, err := c.records.File.ReadAt(b, c.records.Offset)
			require.NoError(t, err)
			out = append(out, b...)
		} else {
			for _, b := range c.records.Batches {
				out = append(out, b...)
			}
		}
		prev = c.at
	}
	out = append(out, s.buf[prev:]...)
	require.EqualValues(t, s.size, len(out), "the size the frame announces")
	return out
}

func randomTags(r *rand.Rand) kmsg.Tags {
	var t kmsg.Tags
	for range r.IntN(3) {
		val := make([]byte, r.IntN(4))
		for i := range val {
			val[i] = byte(r.Uint32())
		}
		t.Set(uint32(10+r.IntN(5)), val) // after the known tags, which kmsg writes first anyway
	}
	return t
}

// randomFetchResponse fills every field of a Fetch response at version,
// with records of each partition split into batches (kept apart in the
// returned Records, and joined in RecordBatches for kmsg), in memory or,
// now and then, as a section of file.
func randomFetchResponse(r *rand.Rand, version int16, file *os.File, fileData []byte) (*kmsg.FetchResponse, *FetchResponse) {
	want := kmsg.NewPtrFetchResponse()
	want.Version = version
	want.ThrottleMillis, want.ErrorCode, want.SessionID = r.Int32(), int16(r.IntN(100)), r.Int32()
	if r.IntN(3) == 0 {
		want.UnknownTags = randomTags(r)
	}
	zc := &FetchResponse{}
	for ti := range r.IntN(4) {
		topic := kmsg.NewFetchResponseTopic()
		topic.Topic = string(rune('a'+ti)) + "-topic"
		for i := range topic.TopicID {
			topic.TopicID[i] = byte(r.Uint32())
		}
		if r.IntN(4) == 0 {
			topic.UnknownTags = randomTags(r)
		}
		var recs []FetchRecords
		for pi := range r.IntN(4) {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition, p.ErrorCode = int32(pi), int16(r.IntN(50))
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = r.Int64(), r.Int64(), r.Int64()
			if r.IntN(2) == 0 {
				for range r.IntN(3) {
					a := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
					a.ProducerID, a.FirstOffset = r.Int64(), r.Int64()
					if r.IntN(4) == 0 {
						a.UnknownTags = randomTags(r)
					}
					p.AbortedTransactions = append(p.AbortedTransactions, a)
				}
				if p.AbortedTransactions == nil {
					p.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
				}
			}
			p.PreferredReadReplica = r.Int32()
			if r.IntN(2) == 0 {
				p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = r.Int32(), r.Int64()
			}
			if r.IntN(2) == 0 {
				p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = r.Int32(), r.Int32()
			}
			if r.IntN(3) == 0 {
				p.SnapshotID.EndOffset, p.SnapshotID.Epoch = r.Int64(), r.Int32()
				p.SnapshotID.UnknownTags = randomTags(r)
			}
			if r.IntN(4) == 0 {
				p.UnknownTags = randomTags(r)
			}
			var rec FetchRecords
			switch r.IntN(5) {
			case 0: // no records by reference: kmsg's own RecordBatches, null or not
				if r.IntN(2) == 0 {
					p.RecordBatches = []byte{1, 2, 3}
				}
			case 1: // a file section
				off := r.IntN(len(fileData))
				n := r.IntN(len(fileData) - off)
				rec = FetchRecords{File: file, Offset: int64(off), Length: int64(n)}
				p.RecordBatches = append([]byte{}, fileData[off:off+n]...)
			default: // batches in memory, some large enough for a 3-byte length
				p.RecordBatches = []byte{}
				rec.Batches = [][]byte{}
				for range r.IntN(4) {
					b := make([]byte, r.IntN(70000))
					for i := range b {
						b[i] = byte(i * 7)
					}
					rec.Batches = append(rec.Batches, b)
					p.RecordBatches = append(p.RecordBatches, b...)
				}
			}
			topic.Partitions = append(topic.Partitions, p)
			recs = append(recs, rec)
		}
		want.Topics = append(want.Topics, topic)
		zc.Records = append(zc.Records, recs)
	}
	if r.IntN(2) == 0 {
		for i := range r.IntN(3) {
			b := kmsg.NewFetchResponseBroker()
			b.NodeID, b.Host, b.Port = int32(i), "broker", 9092+int32(i)
			if r.IntN(2) == 0 {
				b.Rack = kmsg.StringPtr("rack")
			}
			want.Brokers = append(want.Brokers, b)
		}
	}
	// The response the host sends: the same fields, records by reference
	// where it has them (RecordBatches then do not matter).
	sent := *want
	sent.Topics = make([]kmsg.FetchResponseTopic, len(want.Topics))
	for ti, topic := range want.Topics {
		sent.Topics[ti] = topic
		sent.Topics[ti].Partitions = append([]kmsg.FetchResponseTopicPartition(nil), topic.Partitions...)
		for pi := range topic.Partitions {
			if zc.records(ti, pi) != nil {
				sent.Topics[ti].Partitions[pi].RecordBatches = []byte("ignored")
			}
		}
	}
	zc.FetchResponse = &sent
	return want, zc
}

// Every version of a Fetch response, with every field set at random,
// encodes to exactly kmsg's bytes when its record batches travel by
// reference, from memory or from a file.
func TestFetchResponseEncodesAsKmsg(t *testing.T) {
	fileData := make([]byte, 1<<17)
	for i := range fileData {
		fileData[i] = byte(i * 13)
	}
	path := filepath.Join(t.TempDir(), "log")
	require.NoError(t, os.WriteFile(path, fileData, 0o600))
	file, err := os.Open(path)
	require.NoError(t, err)
	defer file.Close()
	r := rand.New(rand.NewPCG(1, 2))
	for version := int16(0); version <= kmsg.NewPtrFetchResponse().MaxVersion(); version++ {
		for range 60 {
			want, zc := randomFetchResponse(r, version, file, fileData)
			require.NoError(t, zc.check())
			got := materialize(t, appendFetchResponse(nil, zc))
			if !bytes.Equal(want.AppendTo(nil), got) {
				t.Fatalf("version %d: encodings differ\nkmsg: %x\nours: %x", version, want.AppendTo(nil), got)
			}
			// And a client reads it back as the response kmsg would.
			back := kmsg.NewPtrFetchResponse()
			back.Version = version
			require.NoError(t, back.ReadFrom(got))
		}
	}
}

func TestFetchResponseCheck(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "x")
	require.NoError(t, err)
	defer f.Close()
	resp := kmsg.NewPtrFetchResponse()
	resp.Topics = []kmsg.FetchResponseTopic{{Partitions: []kmsg.FetchResponseTopicPartition{{}}}}
	for _, tc := range []struct {
		name string
		recs [][]FetchRecords
		ok   bool
	}{
		{"none", nil, true},
		{"one", [][]FetchRecords{{{Batches: [][]byte{{1}}}}}, true},
		{"a topic too many", [][]FetchRecords{{}, {}}, false},
		{"a partition too many", [][]FetchRecords{{{}, {}}}, false},
		{"both kinds", [][]FetchRecords{{{Batches: [][]byte{{1}}, File: f}}}, false},
		{"negative offset", [][]FetchRecords{{{File: f, Offset: -1}}}, false},
	} {
		err := (&FetchResponse{FetchResponse: resp, Records: tc.recs}).check()
		if tc.ok {
			require.NoError(t, err, tc.name)
		} else {
			require.ErrorIs(t, err, ErrFetchRecords, tc.name)
		}
	}
}
