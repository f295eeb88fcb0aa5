package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceAnswer returns a Produce answer with a topic of two partitions,
// one with record errors, an error message and a current leader; with
// hints, leader hints naming broker 0 at host:port; and with unknown, a
// top-level tag Kafka does not define.
func produceAnswer(hints, unknown bool, host string, port int32) *kmsg.ProduceResponse {
	resp := kmsg.NewPtrProduceResponse()
	rt := kmsg.NewProduceResponseTopic()
	rt.Topic, rt.TopicID = "orders", [16]byte{1, 2, 3}
	ok := kmsg.NewProduceResponseTopicPartition()
	ok.BaseOffset, ok.LogAppendTime, ok.LogStartOffset = 42, -1, 0
	moved := kmsg.NewProduceResponseTopicPartition()
	moved.Partition, moved.ErrorCode = 1, kerr.NotLeaderForPartition.Code
	moved.ErrorMessage = kmsg.StringPtr("not the leader")
	moved.CurrentLeader.LeaderID, moved.CurrentLeader.LeaderEpoch = 0, 7
	re := kmsg.NewProduceResponseTopicPartitionErrorRecord()
	re.RelativeOffset, re.ErrorMessage = 3, kmsg.StringPtr("bad record")
	moved.ErrorRecords = append(moved.ErrorRecords, re, kmsg.NewProduceResponseTopicPartitionErrorRecord())
	rt.Partitions = append(rt.Partitions, ok, moved)
	resp.Topics = append(resp.Topics, rt)
	resp.ThrottleMillis = 5
	if hints {
		b := kmsg.NewProduceResponseBroker()
		b.NodeID, b.Host, b.Port = 0, host, port
		resp.Brokers = append(resp.Brokers, b)
	}
	if unknown {
		resp.UnknownTags.Set(9, []byte("later"))
	}
	return resp
}

// The walk finds leader hints in every version it knows, whatever else
// the answer holds; an answer cut short anywhere, with a byte after it, or
// of a version it does not know is an error, never an answer without
// hints.
func TestProduceAnswerNamesBrokers(t *testing.T) {
	for v := int16(produceHintsFrom); v <= produceHintsTo; v++ {
		for _, tc := range []struct {
			name            string
			hints, unknown  bool
			empty, nullName bool
		}{
			{name: "no hints"}, {name: "hints", hints: true}, {name: "unknown tag", unknown: true},
			{name: "hints and an unknown tag", hints: true, unknown: true}, {name: "no topic", empty: true},
		} {
			resp := produceAnswer(tc.hints, tc.unknown, "broker0.upstream", 9092)
			if tc.empty {
				resp.Topics = nil
			}
			resp.SetVersion(v)
			body := resp.AppendTo(nil)
			hints, err := produceAnswerNamesBrokers(body, v)
			require.NoError(t, err, "v%d %s", v, tc.name)
			assert.Equal(t, tc.hints, hints, "v%d %s", v, tc.name)
			for n := range len(body) {
				_, err := produceAnswerNamesBrokers(body[:n], v)
				require.ErrorIs(t, err, errProduceAnswer, "v%d %s cut to %d of %d bytes", v, tc.name, n, len(body))
			}
			_, err = produceAnswerNamesBrokers(append(body, 0), v)
			require.ErrorIs(t, err, errProduceAnswer, "v%d %s with a byte after it", v, tc.name)
		}
	}
	// A kmsg that knows a newer Produce fails here until the walk knows
	// it too (until then, its answers are decoded).
	require.Equal(t, kmsg.NewPtrProduceRequest().MaxVersion(), int16(produceHintsTo), "the newest Produce kmsg knows")
	for _, v := range []int16{produceHintsFrom - 1, produceHintsTo + 1} {
		resp := produceAnswer(false, false, "", 0)
		resp.SetVersion(v)
		_, err := produceAnswerNamesBrokers(resp.AppendTo(nil), v)
		require.ErrorIs(t, err, errProduceAnswer, "v%d", v)
	}
}

// FuzzProduceAnswer checks the walk against kmsg's decoding: an answer
// that kmsg reads with leader hints is never taken for one without.
func FuzzProduceAnswer(f *testing.F) {
	for v := int16(produceHintsFrom); v <= produceHintsTo; v++ {
		for _, hints := range []bool{false, true} {
			resp := produceAnswer(hints, !hints, "broker0.upstream", 9092)
			resp.SetVersion(v)
			f.Add(resp.AppendTo(nil), byte(v-produceHintsFrom))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte, version byte) {
		v := produceHintsFrom + int16(version%(produceHintsTo-produceHintsFrom+1))
		hints, err := produceAnswerNamesBrokers(body, v)
		if err != nil && !errors.Is(err, errProduceAnswer) {
			t.Fatalf("an error that is not errProduceAnswer: %v", err)
		}
		resp := kmsg.NewPtrProduceResponse()
		resp.SetVersion(v)
		if resp.ReadFrom(body) != nil {
			return
		}
		if len(resp.Brokers) > 0 && err == nil && !hints {
			t.Fatalf("v%d: kmsg reads %d leader hints; the walk found none", v, len(resp.Brokers))
		}
	})
}

// A Produce answer from v10 goes back as upstream sent it, byte for byte,
// unless it carries leader hints, whose broker addresses the proxy
// rewrites to its own. The answer without hints has its topic count
// written in two bytes (0x82 0x00: the compact length 2, one topic), which
// an answer decoded and encoded again would have in one.
func TestProduceAnswerForwarded(t *testing.T) {
	for _, hints := range []bool{false, true} {
		t.Run(map[bool]string{false: "no hints", true: "leader hints"}[hints], func(t *testing.T) {
			fake := startFakeUpstream(t)
			host, portText, _ := net.SplitHostPort(fake.addr())
			port, _ := strconv.Atoi(portText)
			var mu sync.Mutex
			var sent []byte // the frame the fake sent last, size excluded
			fake.serveProduce(func(corr int32, version int16) []byte {
				resp := produceAnswer(hints, true, host, int32(port))
				resp.SetVersion(version)
				frame := responseFrame(resp, corr)
				if !hints {
					assert.Equal(t, byte(2), frame[5], "one topic, compact") // after the correlation id and the header's tags
					frame = bytes.Join([][]byte{frame[:5], {0x82, 0x00}, frame[6:]}, nil)
				}
				mu.Lock()
				sent = frame
				mu.Unlock()
				return append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...)
			})
			p := startProxy(t, fake.addr(), nil, plaintextProxy...)
			c := dialRaw(t, p.addr(t, "PLAIN"))
			for _, v := range []int16{10, 11, 12} {
				req := produceTo("orders", 1, 1)
				req.Version = v
				corr := c.send(t, req)
				require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
				got, err := readFrame(c, 1<<20)
				require.NoError(t, err)
				if !hints {
					mu.Lock()
					want := sent
					mu.Unlock()
					require.Equal(t, want, got, "v%d: the answer is not upstream's, byte for byte", v)
					continue
				}
				resp, err := decodeResponse(req, corr, got)
				require.NoError(t, err)
				brokers := resp.(*kmsg.ProduceResponse).Brokers
				require.Len(t, brokers, 1, "v%d", v)
				assert.Equal(t, p.nodeAddr(t, "PLAIN", 0), net.JoinHostPort(brokers[0].Host, strconv.Itoa(int(brokers[0].Port))),
					"v%d: the hint names the proxy's port of node 0", v)
			}
		})
	}
}

// BenchmarkProduceAnswer compares the walk of a Produce v11 answer without
// leader hints (one topic, three partitions acknowledged) with decoding it
// and encoding it again, which the proxy did for every one before.
func BenchmarkProduceAnswer(b *testing.B) {
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 11
	rt := kmsg.NewProduceResponseTopic()
	rt.Topic = "bench"
	for i := range 3 {
		p := kmsg.NewProduceResponseTopicPartition()
		p.Partition, p.BaseOffset, p.LogAppendTime = int32(i), 1<<20, -1
		rt.Partitions = append(rt.Partitions, p)
	}
	resp.Topics = append(resp.Topics, rt)
	body := resp.AppendTo(nil)
	b.Run("walk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if hints, err := produceAnswerNamesBrokers(body, 11); err != nil || hints {
				b.Fatal(hints, err)
			}
		}
	})
	b.Run("decode and encode", func(b *testing.B) {
		b.ReportAllocs()
		var out []byte
		for b.Loop() {
			r := kmsg.NewPtrProduceResponse()
			r.Version = 11
			if err := r.ReadFrom(body); err != nil {
				b.Fatal(err)
			}
			out = r.AppendTo(out[:0])
		}
	})
}
