package main

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// An upstream broker that answers with bytes that are not the response
// the client asked for never crashes the proxy: the client's connection
// is closed cleanly (EOF, nothing written), the proxy goes on serving
// other clients, and nothing is left behind (the claimed gigabyte is not
// allocated, no goroutine stays). A client that leaves while its request
// waits upstream ends the upstream connection too.
func TestBadUpstreamResponses(t *testing.T) {
	fake := startFakeUpstream(t)
	base := socketservertest.TakeGoroutineBaseline()
	p := startProxy(t, fake.addr(), nil, plaintextProxy...)
	good := goodListGroups
	frame := func(corr int32, body ...byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(4+len(body)))
		return append(binary.BigEndian.AppendUint32(b, uint32(corr)), body...)
	}
	for _, tc := range []struct {
		name   string
		answer answerFunc
	}{
		{"garbage body", func(corr int32, _ int16) ([]byte, bool) { return frame(corr, 0xde, 0xad, 0xbe, 0xef), false }},
		{"a body cut short", func(corr int32, v int16) ([]byte, bool) {
			b, _ := good(corr, v)
			return frame(corr, b[8:len(b)-2]...), false
		}},
		{"another correlation id", func(corr int32, v int16) ([]byte, bool) { return good(corr+1, v) }},
		{"a gigabyte announced, ten bytes sent, the broker gone", func(int32, int16) ([]byte, bool) {
			return append(binary.BigEndian.AppendUint32(nil, 1<<30), make([]byte, 10)...), true
		}},
		{"a frame beyond the limit", func(int32, int16) ([]byte, bool) { return binary.BigEndian.AppendUint32(nil, 0x7fffffff), false }},
		{"a negative frame size", func(int32, int16) ([]byte, bool) { return binary.BigEndian.AppendUint32(nil, 0xfffffff0), false }},
		{"an array of two billion groups", func(corr int32, _ int16) ([]byte, bool) {
			return frame(corr, 0, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff), false
		}},
		{"the broker closes", func(int32, int16) ([]byte, bool) { return nil, true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake.setAnswer(tc.answer)
			c := dialRaw(t, p.addr(t, "PLAIN"))
			req := kmsg.NewPtrListGroupsRequest()
			req.Version = 3
			c.send(t, req)
			c.requireClosed(t, 10*time.Second)

			fake.setAnswer(good)
			ok := dialRaw(t, p.addr(t, "PLAIN"))
			resp := ok.roundTrip(t, req).(*kmsg.ListGroupsResponse)
			assert.Zero(t, resp.ErrorCode, "the proxy goes on serving")
		})
	}

	t.Run("the client leaves while upstream holds its request", func(t *testing.T) {
		fake.setAnswer(func(int32, int16) ([]byte, bool) { return nil, false })
		c := dialRaw(t, p.addr(t, "PLAIN"))
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = 3
		c.send(t, req)
		require.Eventually(t, func() bool { return fake.sent(kmsg.ListGroups) > 0 }, 5*time.Second, 5*time.Millisecond)
		c.Close()
		fake.setAnswer(good)
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
	fake.setAnswer(func(int32, int16) ([]byte, bool) { return nil, false }) // held
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
