package socketserver_test

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

type keyRange struct{ Key, Min, Max int16 }

func ranges(keys []kmsg.ApiVersionsResponseApiKey) []keyRange {
	out := make([]keyRange, 0, len(keys))
	for _, k := range keys {
		out = append(out, keyRange{k.ApiKey, k.MinVersion, k.MaxVersion})
	}
	return out
}

func apiVersionsReq(version int16, name, ver string) *kmsg.ApiVersionsRequest {
	r := kmsg.NewPtrApiVersionsRequest()
	r.Version = version
	r.ClientSoftwareName, r.ClientSoftwareVersion = name, ver
	return r
}

func apiVersionsRoundTrip(t testing.TB, c net.Conn, req *kmsg.ApiVersionsRequest, corr int32) *kmsg.ApiVersionsResponse {
	t.Helper()
	send(t, c, req, corr)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = req.Version
	readResponse(t, c, resp, corr)
	return resp
}

// smallAPIs is a listener's API list for the ApiVersions tests.
func smallAPIs(t testing.TB) func(*socketserver.Config) {
	return func(c *socketserver.Config) {
		c.APIs = []socketserver.API{mustAPI(t, 10, 0, 4), mustAPI(t, 3, 0, 12), mustAPI(t, 7, 1, 3)}
	}
}

// The server answers ApiVersions v0 to v4 itself with the listener's
// enabled APIs, ApiVersions and the SASL exchange (SaslHandshake from v0, as
// librdkafka requires, and SaslAuthenticate) included, ordered by key.
func TestApiVersionsAnsweredByServer(t *testing.T) {
	seen := make(chan *socketserver.Request, 1)
	srv := socketservertest.NewServer(t, nil, smallAPIs(t), queueHandler(seen))
	want := []keyRange{{3, 0, 12}, {7, 1, 3}, {10, 0, 4}, {17, 0, 1}, {18, 0, 4}, {36, 0, 2}}
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	for v := int16(0); v <= 4; v++ {
		t.Run("v"+strconv.Itoa(int(v)), func(t *testing.T) {
			resp := apiVersionsRoundTrip(t, c, apiVersionsReq(v, "kafkanet-test", "1.0"), int32(100+v))
			assert.Equal(t, int16(0), resp.ErrorCode)
			assert.Equal(t, want, ranges(resp.ApiKeys))
		})
	}
	assert.Empty(t, seen, "the handler saw an ApiVersions request")
}

// An ApiVersions request newer than the server knows is not parsed: it is
// answered with UNSUPPORTED_VERSION in the v0 layout, listing only
// ApiVersions' own range, and the connection stays open.
func TestApiVersionsTooNew(t *testing.T) {
	seen := make(chan *socketserver.Request, 1)
	srv := socketservertest.NewServer(t, nil, smallAPIs(t), queueHandler(seen))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	for _, tc := range []struct {
		name    string
		version int16
		body    []byte
	}{
		// A flexible v9 header and a body the server cannot know.
		{"v9", 9, []byte{0, 6, 'f', 'u', 't', 'u', 'r', 'e', 2, 'x', 0, 0xff}},
		{"v5 with an empty body", 5, nil},
		{"v32767", 32767, []byte{1, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			write(t, c, frame(append(headerBytes(18, tc.version, 11, strp("c"), []byte{0}), tc.body...)))
			// correlation id; v0 body: ErrorCode 35, one ApiKeys entry {18, 0, 4}.
			assert.Equal(t, []byte{0, 0, 0, 11, 0, 35, 0, 0, 0, 1, 0, 18, 0, 0, 0, 4}, readRawFrame(t, c))
			// The connection stays open and serves the next request.
			resp := apiVersionsRoundTrip(t, c, apiVersionsReq(0, "", ""), 12)
			assert.Equal(t, int16(0), resp.ErrorCode)
			assert.Len(t, resp.ApiKeys, 6)
		})
	}
	assert.Empty(t, seen)
}

// KIP-511: from v3 the client software name and version must match
// [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?; otherwise INVALID_REQUEST, the
// connection stays open and its client information is left as it was.
// Valid values are seen on the connection's later requests.
func TestApiVersionsClientSoftware(t *testing.T) {
	type sw struct{ name, version string }
	for _, tc := range []struct {
		name    string
		version int16
		first   *sw // a valid ApiVersions sent before, if any
		sent    sw
		code    int16
		want    sw
	}{
		{"valid v3", 3, nil, sw{"franz-go", "1.22.3"}, 0, sw{"franz-go", "1.22.3"}},
		{"valid v4", 4, nil, sw{"librdkafka", "2.6.0-RC1"}, 0, sw{"librdkafka", "2.6.0-RC1"}},
		{"single characters", 3, nil, sw{"a", "1"}, 0, sw{"a", "1"}},
		{"v2 ignores the fields", 2, nil, sw{"bad name!", "x y"}, 0, sw{}},
		{"invalid name", 3, nil, sw{"bad name!", "1.0"}, 42, sw{}},
		{"invalid version", 3, nil, sw{"java", "1.0 beta"}, 42, sw{}},
		{"name ends with a dot", 3, nil, sw{"java.", "1.0"}, 42, sw{}},
		{"name starts with a dash", 4, nil, sw{"-java", "1.0"}, 42, sw{}},
		{"empty name", 3, nil, sw{"", "1.0"}, 42, sw{}},
		{"invalid after valid keeps the earlier values", 3, &sw{"java", "3.9.0"}, sw{"bad name!", "1"}, 42, sw{"java", "3.9.0"}},
		{"valid after valid replaces them", 3, &sw{"java", "3.9.0"}, sw{"go", "1.26"}, 0, sw{"go", "1.26"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := make(chan *socketserver.Request, 1)
			srv := socketservertest.NewServer(t, nil, smallAPIs(t), queueHandler(seen))
			c := socketservertest.Dial(t, srv, "PLAINTEXT")
			if tc.first != nil {
				resp := apiVersionsRoundTrip(t, c, apiVersionsReq(3, tc.first.name, tc.first.version), 1)
				require.Equal(t, int16(0), resp.ErrorCode)
			}
			resp := apiVersionsRoundTrip(t, c, apiVersionsReq(tc.version, tc.sent.name, tc.sent.version), 2)
			assert.Equal(t, tc.code, resp.ErrorCode)
			if tc.code != 0 {
				assert.Empty(t, resp.ApiKeys)
			} else {
				assert.Len(t, resp.ApiKeys, 6)
			}

			// The connection is open; the next request carries the values.
			send(t, c, metadataReq(4), 3)
			r := recv(t, seen)
			assert.Equal(t, tc.want.name, r.Conn.ClientSoftwareName)
			assert.Equal(t, tc.want.version, r.Conn.ClientSoftwareVersion)
			require.NoError(t, respondEmpty(r))
			mresp := kmsg.NewPtrMetadataResponse()
			mresp.Version = 4
			readResponse(t, c, mresp, 3)
		})
	}
}

// With key 18 in Config.APIs the host answers ApiVersions itself. As in
// Kafka, the ApiVersions request carries the connection's earlier client
// information and later requests the new one.
func TestApiVersionsHostTakeover(t *testing.T) {
	seen := make(chan *socketserver.Request, 1)
	srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) {
		c.APIs = []socketserver.API{mustAPI(t, 3, 0, 12), mustAPI(t, 18, 0, 3)}
	}, queueHandler(seen))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")

	send(t, c, apiVersionsReq(3, "kgo", "1.0"), 21)
	r := recv(t, seen)
	assert.Equal(t, int16(18), r.APIKey)
	body, ok := r.Body.(*kmsg.ApiVersionsRequest)
	require.True(t, ok, "body is %T", r.Body)
	assert.Equal(t, "kgo", body.ClientSoftwareName)
	assert.Empty(t, r.Conn.ClientSoftwareName, "the ApiVersions request itself carries the earlier client information")
	host := kmsg.NewPtrApiVersionsResponse()
	key := kmsg.NewApiVersionsResponseApiKey()
	key.ApiKey, key.MinVersion, key.MaxVersion = 3, 1, 2
	host.ApiKeys = []kmsg.ApiVersionsResponseApiKey{key}
	host.ThrottleMillis = 7
	require.NoError(t, r.Respond(host))
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	readResponse(t, c, resp, 21)
	assert.Equal(t, []keyRange{{3, 1, 2}}, ranges(resp.ApiKeys))
	assert.Equal(t, int32(7), resp.ThrottleMillis)

	send(t, c, metadataReq(1), 22)
	r = recv(t, seen)
	assert.Equal(t, "kgo", r.Conn.ClientSoftwareName)
	assert.Equal(t, "1.0", r.Conn.ClientSoftwareVersion)
	require.NoError(t, respondEmpty(r))
	mresp := kmsg.NewPtrMetadataResponse()
	mresp.Version = 1
	readResponse(t, c, mresp, 22)

	// Above the host's range the server still answers UNSUPPORTED_VERSION,
	// giving the host's range.
	send(t, c, apiVersionsReq(4, "kgo", "1.0"), 23)
	assert.Equal(t, []byte{0, 0, 0, 23, 0, 35, 0, 0, 0, 1, 0, 18, 0, 0, 0, 3}, readRawFrame(t, c))
	assert.Empty(t, seen)
}
