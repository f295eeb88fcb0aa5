package main

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/socketserver"
)

// A client's requests of APIs forwarded raw go upstream as the client
// sends them, without waiting for the answers before them: an upstream
// that answers only once it holds three ListGroups requests gets them all,
// and the client its answers, in order. A proxy that forwarded one request
// at a time would wait forever for the first answer.
func TestRequestsPipelinedUpstream(t *testing.T) {
	const inFlight = 3
	require.GreaterOrEqual(t, pipelineDepth, inFlight)
	fake := startFakeUpstream(t)
	var held []int32
	var heldVersion int16
	fake.setAnswer(func(key kmsg.Key, corr int32, version int16) ([]byte, bool) {
		if key != kmsg.ListGroups {
			return fake.good(key, corr, version)
		}
		held, heldVersion = append(held, corr), version // serve's goroutine only
		if len(held) < inFlight {
			return nil, false // held: answered with the last
		}
		var out []byte
		for _, c := range held {
			b, _ := fake.good(key, c, heldVersion)
			out = append(out, b...)
		}
		held = nil
		return out, false
	})
	p := startProxy(t, fake.addr(), nil, plaintextProxy...)
	c := dialRaw(t, p.addr(t, "PLAIN"))
	var corrs []int32
	for range inFlight {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = 4
		corrs = append(corrs, c.send(t, req))
	}
	for _, corr := range corrs {
		resp := kmsg.NewPtrListGroupsResponse()
		resp.Version = 4
		c.read(t, resp, corr)
	}
	require.Equal(t, inFlight, fake.sent(kmsg.ListGroups))
}

// The proxy leaves its client sockets' buffers to the operating system
// unless Kafka's keys size them (osSocketBuffers).
func TestSocketBuffersLeftToTheSystem(t *testing.T) {
	for _, tt := range []struct {
		name          string
		props         listener.Properties
		receive, send int
	}{
		{"neither key", listener.Properties{}, -1, -1},
		{"the receive buffer set", listener.Properties{"socket.receive.buffer.bytes": "65536"}, 65536, -1},
		{"both set, one to Kafka's default", listener.Properties{"socket.receive.buffer.bytes": "102400", "socket.send.buffer.bytes": "131072"}, 102400, 131072},
		{"both left to the system explicitly", listener.Properties{"socket.receive.buffer.bytes": "-1", "socket.send.buffer.bytes": "-1"}, -1, -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			props := listener.Properties{"listeners": "PLAIN://127.0.0.1:0", "listener.security.protocol.map": "PLAIN:PLAINTEXT", "inter.broker.listener.name": "PLAIN"}
			for k, v := range tt.props {
				props[k] = v
			}
			scfg, err := socketserver.ConfigFromProperties(props)
			require.NoError(t, err)
			osSocketBuffers(props, &scfg)
			require.Equal(t, tt.receive, scfg.ReceiveBufferBytes, "SO_RCVBUF")
			require.Equal(t, tt.send, scfg.SendBufferBytes, "SO_SNDBUF")
		})
	}
}
