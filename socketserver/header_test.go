package socketserver_test

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

func mustAPI(t testing.TB, key, min, max int16) socketserver.API {
	t.Helper()
	require.NotNil(t, kmsg.RequestForKey(key), "kmsg does not know key %d", key)
	return socketserver.KmsgAPI(kmsg.Key(key), min, max)
}

// Requests the network layer cannot accept close the connection without a
// response and never reach the handler (Kafka's processChannelException).
func TestBadRequestsCloseWithoutResponse(t *testing.T) {
	metadataV1Body := metadataReq(1).AppendTo(nil)
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"empty frame", frame(nil)},
		{"3-byte header", frame([]byte{0, 3, 0})},
		{"header without client id length", frame(headerBytes(3, 1, 1, nil, nil)[:8])},
		{"header with half a client id length", frame(headerBytes(3, 1, 1, nil, nil)[:9])},
		{"client id longer than the frame", frame(append(binary.BigEndian.AppendUint64(nil, 0x0003_0001_0000_0001), 0, 50, 'a', 'b', 'c'))},
		{"client id length -2", frame(append(binary.BigEndian.AppendUint64(nil, 0x0003_0001_0000_0001), 0xff, 0xfe, 'a', 'b'))},
		{"unknown key 9999", frame(append(headerBytes(9999, 0, 1, strp("c"), nil), metadataV1Body...))},
		{"unknown key 95", frame(append(headerBytes(95, 0, 1, strp("c"), []byte{0}), 0))},
		{"negative key", frame(append(headerBytes(-1, 0, 1, strp("c"), nil), metadataV1Body...))},
		{"key not enabled on the listener (Produce)", requestFrame(kmsg.NewPtrProduceRequest(), 1, strp("c"))},
		{"version above the enabled max (Metadata v9, max 5)", requestFrame(metadataReq(9), 1, strp("c"))},
		{"version below the enabled min (Metadata v0, min 1)", requestFrame(metadataReq(0), 1, strp("c"))},
		{"negative version", frame(append(headerBytes(3, -1, 1, strp("c"), nil), metadataV1Body...))},
		{"truncated body (Metadata v1 with 5 topics and none sent)", frame(append(headerBytes(3, 1, 1, strp("c"), nil), 0, 0, 0, 5))},
		{"header tag count with no tags (FindCoordinator v3)", frame(append(headerBytes(10, 3, 1, strp("c"), []byte{2}), 0))},
		{"header tag larger than the frame (FindCoordinator v3)", frame(headerBytes(10, 3, 1, strp("c"), []byte{1, 0, 100, 1}))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := make(chan *socketserver.Request, 1)
			srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) {
				c.APIs = []socketserver.API{mustAPI(t, 3, 1, 5), mustAPI(t, 10, 0, 4)}
			}, queueHandler(seen))
			c := socketservertest.Dial(t, srv, "PLAINTEXT")
			write(t, c, tc.frame)
			requireClosedNoResponse(t, c)
			require.Empty(t, seen, "the handler saw the request")

			// Others are still served.
			c = socketservertest.Dial(t, srv, "PLAINTEXT")
			send(t, c, metadataReq(5), 3)
			r := recv(t, seen)
			require.NoError(t, respondEmpty(r))
			resp := kmsg.NewPtrMetadataResponse()
			resp.Version = 5
			readResponse(t, c, resp, 3)
		})
	}
}

// A header v2 (flexible request) may carry tagged fields; the server skips
// them and decodes the body after them.
func TestHeaderV2TaggedFields(t *testing.T) {
	for _, tc := range []struct {
		name string
		tags []byte
	}{
		{"no tags", []byte{0}},
		{"one tag", []byte{1, 0, 3, 'a', 'b', 'c'}},
		{"two tags, one empty, one with a two-byte tag number", []byte{2, 5, 0, 0xac, 0x02, 2, 0xff, 0xff}},
		{"a 200-byte tag (two-byte size)", append([]byte{1, 9, 0xc8, 0x01}, make([]byte, 200)...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := make(chan *socketserver.Request, 1)
			srv := socketservertest.NewServer(t, nil, withAPIs, queueHandler(seen))
			c := socketservertest.Dial(t, srv, "PLAINTEXT")

			req := metadataReq(9)
			topic := kmsg.NewMetadataRequestTopic()
			topic.Topic = kmsg.StringPtr("orders")
			req.Topics = append(req.Topics, topic)
			req.IncludeClusterAuthorizedOperations = true
			payload := req.AppendTo(headerBytes(3, 9, 77, strp("tagged"), tc.tags))
			write(t, c, frame(payload))

			r := recv(t, seen)
			assert.Equal(t, int16(3), r.APIKey)
			assert.Equal(t, int16(9), r.APIVersion)
			assert.Equal(t, int32(77), r.CorrelationID)
			require.NotNil(t, r.ClientID)
			assert.Equal(t, "tagged", *r.ClientID)
			assert.Equal(t, len(payload), r.Size)
			body, ok := r.Body.(*kmsg.MetadataRequest)
			require.True(t, ok, "body is %T", r.Body)
			assert.Equal(t, int16(9), body.Version)
			require.Len(t, body.Topics, 1)
			assert.Equal(t, "orders", *body.Topics[0].Topic)
			assert.True(t, body.IncludeClusterAuthorizedOperations)

			require.NoError(t, respondEmpty(r))
			resp := kmsg.NewPtrMetadataResponse()
			resp.Version = 9
			readResponse(t, c, resp, 77)
		})
	}
}

// ControlledShutdown v0 is the one request whose header has no client id.
func TestControlledShutdownV0WithoutClientID(t *testing.T) {
	seen := make(chan *socketserver.Request, 1)
	srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) {
		c.APIs = []socketserver.API{mustAPI(t, 7, 0, 3)}
	}, queueHandler(seen))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")

	payload := []byte{0, 7, 0, 0, 0, 0, 0, 5, 0, 0, 0, 42} // key 7, v0, correlation id 5, BrokerID 42
	write(t, c, frame(payload))
	r := recv(t, seen)
	assert.Equal(t, int16(7), r.APIKey)
	assert.Equal(t, int16(0), r.APIVersion)
	assert.Equal(t, int32(5), r.CorrelationID)
	assert.Nil(t, r.ClientID)
	body, ok := r.Body.(*kmsg.ControlledShutdownRequest)
	require.True(t, ok, "body is %T", r.Body)
	assert.Equal(t, int32(42), body.BrokerID)

	resp := kmsg.NewPtrControlledShutdownResponse()
	resp.ErrorCode = 15
	require.NoError(t, r.Respond(resp))
	// correlation id, ErrorCode, empty PartitionsRemaining array.
	assert.Equal(t, []byte{0, 0, 0, 5, 0, 15, 0, 0, 0, 0}, readRawFrame(t, c))

	// v1 has a client id, parsed as usual.
	cs := kmsg.NewPtrControlledShutdownRequest()
	cs.Version, cs.BrokerID = 1, 43
	send(t, c, cs, 6)
	r = recv(t, seen)
	require.NotNil(t, r.ClientID)
	assert.Equal(t, "test", *r.ClientID)
	assert.Equal(t, int32(43), r.Body.(*kmsg.ControlledShutdownRequest).BrokerID)
	require.NoError(t, respondEmpty(r))
	resp = kmsg.NewPtrControlledShutdownResponse()
	resp.Version = 1
	readResponse(t, c, resp, 6)
}
