package main

import (
	"encoding/binary"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/internal/testkit"
)

// An upstream broker that answers with bytes that are not the response
// the client asked for never crashes the proxy. An answer the proxy
// decodes (DescribeCluster's: it names brokers) is read whole and checked:
// the client's connection is closed cleanly (EOF, nothing written). An
// answer it forwards raw (ListGroups') goes to the client as upstream sent
// it, as through a TCP relay: a body that does not decode reaches the
// client, whose decoder says so, and one cut short reaches it cut short
// before the connection closes; but a frame whose size is out of bounds,
// another correlation id and a broker that closes are caught before a byte
// is written. Either way the proxy goes on serving other clients, and
// nothing is left behind (the claimed gigabyte is not allocated, no
// goroutine stays). A client that leaves while its request waits upstream
// ends the upstream connection too.
func TestBadUpstreamResponses(t *testing.T) {
	fake := startFakeUpstream(t)
	base := testkit.TakeGoroutineBaseline()
	p := startProxy(t, fake.addr(), nil, plaintextProxy...)
	frame := func(corr int32, body ...byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(4+len(body)))
		return append(binary.BigEndian.AppendUint32(b, uint32(corr)), body...)
	}
	// What the client sees of a raw answer.
	const (
		closed = iota // the connection closes, nothing written
		passed        // upstream's frame, as it is
		cut           // the start of upstream's frame, then the connection closes
	)
	for _, tc := range []struct {
		name   string
		answer answerFunc
		raw    int
	}{
		{"garbage body", func(_ kmsg.Key, corr int32, _ int16) ([]byte, bool) {
			return frame(corr, 0, 0xde, 0xad, 0xbe, 0xef), false // an empty tag section, then garbage
		}, passed},
		{"a body cut short", func(key kmsg.Key, corr int32, v int16) ([]byte, bool) {
			b, _ := fake.good(key, corr, v)
			return frame(corr, b[8:len(b)-2]...), false
		}, passed},
		{"another correlation id", func(key kmsg.Key, corr int32, v int16) ([]byte, bool) { return fake.good(key, corr+1, v) }, closed},
		{"a gigabyte announced, ten bytes sent, the broker gone", func(_ kmsg.Key, corr int32, _ int16) ([]byte, bool) {
			b := binary.BigEndian.AppendUint32(nil, 1<<30)
			b = binary.BigEndian.AppendUint32(b, uint32(corr))
			return append(b, make([]byte, 10)...), true
		}, cut},
		{"a frame beyond the limit", func(kmsg.Key, int32, int16) ([]byte, bool) {
			return binary.BigEndian.AppendUint32(nil, 0x7fffffff), false
		}, closed},
		{"a negative frame size", func(kmsg.Key, int32, int16) ([]byte, bool) {
			return binary.BigEndian.AppendUint32(nil, 0xfffffff0), false
		}, closed},
		{"an array of two billion entries", func(_ kmsg.Key, corr int32, _ int16) ([]byte, bool) {
			return frame(corr, 0, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff), false
		}, passed},
		{"the broker closes", func(kmsg.Key, int32, int16) ([]byte, bool) { return nil, true }, closed},
	} {
		for _, api := range []struct {
			key kmsg.Key
			req kmsg.Request
			raw bool
		}{
			{kmsg.DescribeCluster, &kmsg.DescribeClusterRequest{Version: 1}, false},
			{kmsg.ListGroups, &kmsg.ListGroupsRequest{Version: 3}, true},
		} {
			t.Run(kmsg.NameForKey(int16(api.key))+"/"+tc.name, func(t *testing.T) {
				fake.setAnswer(tc.answer)
				c := dialRaw(t, p.addr(t, "PLAIN"))
				corr := c.send(t, api.req)
				switch {
				case !api.raw || tc.raw == closed:
					c.requireClosed(t, 10*time.Second)
				case tc.raw == passed:
					want, _ := tc.answer(api.key, corr, api.req.GetVersion())
					require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
					got, err := readFrame(c, 1<<20)
					require.NoError(t, err)
					assert.Equal(t, want[4:], got, "upstream's frame")
				default: // cut
					require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
					got, err := io.ReadAll(c)
					require.NoError(t, err, "a clean close")
					assert.Less(t, len(got), 1<<30, "the whole frame arrived")
				}

				fake.setAnswer(fake.good)
				ok := dialRaw(t, p.addr(t, "PLAIN"))
				ok.roundTrip(t, api.req)
			})
		}
	}

	t.Run("the client leaves while upstream holds its request", func(t *testing.T) {
		fake.setAnswer(func(kmsg.Key, int32, int16) ([]byte, bool) { return nil, false })
		c := dialRaw(t, p.addr(t, "PLAIN"))
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = 3
		c.send(t, req)
		require.Eventually(t, func() bool { return fake.sent(kmsg.ListGroups) > 0 }, 5*time.Second, 5*time.Millisecond)
		c.Close()
		fake.setAnswer(fake.good)
	})

	p.close()
	base.RequireReturned(t)
	assert.Zero(t, fake.sent(kmsg.SASLHandshake)+fake.sent(kmsg.SASLAuthenticate), "SASL requests reached upstream")
}

// More forwarded requests than Kafka's queued.max.requests (500) wait
// upstream at once, as long polls do for many consumers: each is
// forwarded, none waits for another's answer.
func TestManyRequestsHeldUpstream(t *testing.T) {
	fake := startFakeUpstream(t)
	fake.setAnswer(func(kmsg.Key, int32, int16) ([]byte, bool) { return nil, false }) // held
	p := startProxy(t, fake.addr(), nil, plaintextProxy...)
	const n = 600
	req := kmsg.NewPtrListGroupsRequest()
	req.Version = 3
	for range n {
		dialRaw(t, p.addr(t, "PLAIN")).send(t, req)
	}
	require.Eventually(t, func() bool { return fake.sent(kmsg.ListGroups) == n }, 30*time.Second, 10*time.Millisecond,
		"%d of %d requests reached upstream", fake.sent(kmsg.ListGroups), n)
}

func totalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// An upstream that announces a 1 GiB answer and sends ten bytes makes the
// proxy allocate what arrived, not the gigabyte, on every path: a flexible
// answer whose header has tags, a Produce v10+ answer, and a large raw
// answer whose head came in the read buffer with the answer before it
// (each allocated the gigabyte before).
func TestClaimedAnswerSizeNotAllocated(t *testing.T) {
	head := func(corr int32, tags ...byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, 1<<30)
		b = binary.BigEndian.AppendUint32(b, uint32(corr))
		return append(append(b, tags...), make([]byte, 10)...)
	}
	check := func(t *testing.T, before uint64) {
		require.Eventually(t, func() bool { return goroutinesIn("(*session).readAnswers") == 0 }, 10*time.Second, time.Millisecond)
		grew := totalAlloc() - before
		assert.Less(t, grew, uint64(256<<20), "allocated %d MiB for a claimed 1 GiB answer", grew>>20)
	}
	t.Run("tagged header", func(t *testing.T) {
		fake := startFakeUpstream(t)
		fake.setAnswer(func(key kmsg.Key, corr int32, v int16) ([]byte, bool) {
			if key != kmsg.ListGroups {
				return fake.good(key, corr, v)
			}
			return head(corr, 1), true // tag count 1
		})
		p := startProxy(t, fake.addr(), nil, plaintextProxy...)
		c := dialRaw(t, p.addr(t, "PLAIN"))
		before := totalAlloc()
		c.send(t, listGroups())
		c.requireClosed(t, 10*time.Second)
		check(t, before)
	})
	t.Run("produce v10", func(t *testing.T) {
		fake := startFakeUpstream(t)
		fake.serveProduce(func(corr int32, v int16) []byte { return head(corr, 0) })
		p := startProxy(t, fake.addr(), nil, plaintextProxy...)
		c := dialRaw(t, p.addr(t, "PLAIN"))
		before := totalAlloc()
		req := produceTo("t", 0, 1)
		req.Version = 10
		c.send(t, req)
		time.Sleep(300 * time.Millisecond)
		c.Close()
		check(t, before)
	})
	t.Run("large raw answer behind a small one", func(t *testing.T) {
		fake := startFakeUpstream(t)
		n := 0
		fake.setAnswer(func(key kmsg.Key, corr int32, v int16) ([]byte, bool) {
			if key != kmsg.ListGroups {
				return fake.good(key, corr, v)
			}
			n++
			if n == 1 {
				return nil, false // held: answered with the second
			}
			first, _ := fake.good(key, corr-1, v)
			return append(first, head(corr, 0)...), true
		})
		p := startProxy(t, fake.addr(), nil, plaintextProxy...)
		c := dialRaw(t, p.addr(t, "PLAIN"))
		before := totalAlloc()
		c.send(t, listGroups())
		c.send(t, listGroups())
		time.Sleep(500 * time.Millisecond)
		c.Close()
		check(t, before)
	})
}

// An answer of 4 bytes (a correlation id, no tag section) to a flexible
// request closes the client's connection, whether or not the answers'
// reader was lingering when its head came: read by linger (8 bytes), its
// size is checked again against the 9-byte head it needs (the connection
// hung, waiting for a byte of no answer).
func TestShortAnswerAfterLinger(t *testing.T) {
	fake := startFakeUpstream(t)
	n := 0
	fake.setAnswer(func(key kmsg.Key, corr int32, v int16) ([]byte, bool) {
		if key != kmsg.ListGroups {
			return fake.good(key, corr, v)
		}
		n++
		if n == 1 {
			return fake.good(key, corr, v)
		}
		return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 4), uint32(corr)), false
	})
	p := startProxy(t, fake.addr(), &proxyOptions{answerLinger: time.Hour}, plaintextProxy...)
	c := dialRaw(t, p.addr(t, "PLAIN"))
	c.roundTrip(t, listGroups())
	require.Eventually(t, func() bool { return goroutinesIn("(*session).linger") == 1 }, 10*time.Second, time.Millisecond)
	c.send(t, listGroups())
	c.requireClosed(t, 3*time.Second)
}
