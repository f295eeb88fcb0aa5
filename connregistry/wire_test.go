package connregistry_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/connregistry"
)

var (
	_ kmsg.Request  = (*connregistry.ListClientConnectionsRequest)(nil)
	_ kmsg.Response = (*connregistry.ListClientConnectionsResponse)(nil)
)

// Golden bytes written by hand from KIP-1329's version-0 schema (flexible:
// compact strings are length+1 as an unsigned varint, compact arrays
// count+1, each struct ends with a tagged-field section).
func TestGoldenRequest(t *testing.T) {
	golden := []byte{
		0x0b, 'U', 's', 'e', 'r', ':', 'a', 'l', 'i', 'c', 'e', // PrincipalFilter "User:alice"
		0x00,                               // ClientAddressFilter null
		0x07, 'C', 'L', 'I', 'E', 'N', 'T', // ListenerFilter "CLIENT"
		0x00, // no tagged fields
	}
	req := &connregistry.ListClientConnectionsRequest{PrincipalFilter: sp("User:alice"), ListenerFilter: sp("CLIENT")}
	assert.Equal(t, golden, req.AppendTo(nil))
	var back connregistry.ListClientConnectionsRequest
	require.NoError(t, back.ReadFrom(golden))
	assert.Equal(t, *req, back)

	// The IncludeClosed tag: 1 tag, tag 0, size 1, true.
	withTag := append(golden[:len(golden)-1:len(golden)-1], 0x01, 0x00, 0x01, 0x01)
	require.NoError(t, back.ReadFrom(withTag))
	assert.True(t, back.IncludeClosed)
	back.IncludeClosed = true
	assert.Equal(t, withTag, back.AppendTo(nil))
}

func TestGoldenResponse(t *testing.T) {
	golden := []byte{
		0x00, 0x00, 0x00, 0x00, // ThrottleTimeMs 0
		0x00, 0x00, // ErrorCode 0
		0x02,                // one connection
		0x04, 'i', 'd', '1', // ConnectionId "id1"
		0x06, 'a', 'l', 'i', 'c', 'e', // Principal "alice"
		0x05, 'U', 's', 'e', 'r', // PrincipalType "User"
		0x0a, '1', '2', '7', '.', '0', '.', '0', '.', '1', // ClientAddress "127.0.0.1"
		0x00, 0x00, 0xd4, 0x31, // ClientPort 54321
		0x07, 'C', 'L', 'I', 'E', 'N', 'T', // ListenerName
		0x0f, 'S', 'A', 'S', 'L', '_', 'P', 'L', 'A', 'I', 'N', 'T', 'E', 'X', 'T', // SecurityProtocol
		0x04, 'k', 'g', 'o', // SoftwareName
		0x05, '1', '.', '2', '2', // SoftwareVersion
		0x00, 0x00, 0x01, 0x96, 0x76, 0xbe, 0xb0, 0xf0, // ConnectedSince 1745748930800
		0x00, // connection: no tagged fields
		0x00, // response: no tagged fields
	}
	var resp connregistry.ListClientConnectionsResponse
	require.NoError(t, resp.ReadFrom(golden))
	require.Len(t, resp.Connections, 1)
	want := connregistry.ConnectionRecord{
		ConnectionID: "id1", Principal: "alice", PrincipalType: "User", ClientAddress: "127.0.0.1", ClientPort: 54321,
		ListenerName: "CLIENT", SecurityProtocol: "SASL_PLAINTEXT", SoftwareName: "kgo", SoftwareVersion: "1.22",
		ConnectedSince: 1745748930800,
	}
	assert.Equal(t, want, resp.Connections[0])
}

// Every field and tag survives an encode/decode round trip; unknown tags
// are skipped.
func TestResponseRoundTrip(t *testing.T) {
	msg := "no"
	resp := &connregistry.ListClientConnectionsResponse{
		ThrottleTimeMs: 5, ErrorCode: 0, ErrorMessage: &msg,
		Connections: []connregistry.ConnectionRecord{{
			ConnectionID: "127.0.0.1:9092-127.0.0.1:5000-0-1", Principal: "bob", PrincipalType: "User",
			ClientAddress: "::1", ClientPort: 5000, ListenerName: "REPLICATION", SecurityProtocol: "SSL",
			SoftwareName: "librdkafka", SoftwareVersion: "2.0.2", ConnectedSince: 1,
			ClientID: "rdkafka", SASLMechanism: "SCRAM-SHA-512", TLSVersion: "TLS 1.3", CipherSuite: "TLS_AES_128_GCM_SHA256",
			AuthenticatedAt: 2, SessionExpiry: 3, LastActivity: 4, BytesIn: 5, BytesOut: 6, Requests: 7,
			State: "ready", Plane: "data", ClosedAt: 8, CloseReason: "idle", ThrottledUntil: 9, ThrottleTimeMs: 10,
			ProxyAddress: "[2001:db8::1]:40000",
			ServerName:   "broker-0.a.example.com",
		}, {ConnectionID: "x", AuthenticatedAt: -1, SessionExpiry: -1}},
	}
	b := resp.AppendTo(nil)
	var back connregistry.ListClientConnectionsResponse
	require.NoError(t, back.ReadFrom(b))
	assert.Equal(t, resp.Connections, back.Connections)
	assert.Equal(t, msg, *back.ErrorMessage)
	assert.Equal(t, int32(5), back.ThrottleTimeMs)

	// A tag this version does not know (99) is skipped.
	plain := *resp
	plain.ErrorMessage = nil
	b = plain.AppendTo(nil) // ends with an empty tag section
	unknown := append(b[:len(b)-1:len(b)-1], 0x02, 0x00, 0x03, 0x03, 'n', 'o', 0x63, 0x01, 0xff)
	require.NoError(t, back.ReadFrom(unknown))
	assert.Equal(t, "no", *back.ErrorMessage)
}

// A throttled connection's fields travel as tags 14 and 15, int64 each,
// after the others, and only when set: a reader of KIP-1329's schema
// alone, or of this package before them, skips them as unknown tags.
func TestThrottleTags(t *testing.T) {
	rec := connregistry.ConnectionRecord{ConnectionID: "a", ThrottledUntil: 0x0102, ThrottleTimeMs: 0x0304}
	b := (&connregistry.ListClientConnectionsResponse{Connections: []connregistry.ConnectionRecord{rec}}).AppendTo(nil)
	tail := []byte{
		14, 8, 0, 0, 0, 0, 0, 0, 0x01, 0x02, // ThrottledUntil
		15, 8, 0, 0, 0, 0, 0, 0, 0x03, 0x04, // ThrottleTimeMs
		0x00, // response: no tagged fields
	}
	require.Greater(t, len(b), len(tail))
	assert.Equal(t, tail, b[len(b)-len(tail):])

	for _, tc := range []struct {
		name  string
		rec   connregistry.ConnectionRecord
		count byte
	}{{"not throttled", connregistry.ConnectionRecord{ConnectionID: "a"}, 6}, {"throttled", rec, 8}} {
		t.Run(tc.name, func(t *testing.T) {
			// The record's six int64 tags are always sent; the throttle's two only when set.
			b := (&connregistry.ListClientConnectionsResponse{Connections: []connregistry.ConnectionRecord{tc.rec}}).AppendTo(nil)
			var back connregistry.ListClientConnectionsResponse
			require.NoError(t, back.ReadFrom(b))
			assert.Equal(t, tc.rec.ThrottledUntil, back.Connections[0].ThrottledUntil)
			assert.Equal(t, tc.rec.ThrottleTimeMs, back.Connections[0].ThrottleTimeMs)
			// Throttle time, error code and array length, then the record: id "a",
			// 3 empty strings, port, 4 empty strings, ConnectedSince; the tag count follows.
			const at = 4 + 2 + 1 + 2 + 3 + 4 + 4 + 8
			assert.Equal(t, tc.count, b[at], "tag count")
		})
	}
}

// The load balancer's address travels as tag 16, a compact string, last,
// and only on a connection that came through one: a reader of KIP-1329's
// schema alone skips it as an unknown tag.
func TestProxyAddrTag(t *testing.T) {
	rec := connregistry.ConnectionRecord{ConnectionID: "a", ProxyAddress: "10.0.0.9:80"}
	b := (&connregistry.ListClientConnectionsResponse{Connections: []connregistry.ConnectionRecord{rec}}).AppendTo(nil)
	tail := append([]byte{16, 12, 12}, "10.0.0.9:80"...) // tag, tag size, compact length (11+1)
	tail = append(tail, 0x00)                            // response: no tagged fields
	require.Greater(t, len(b), len(tail))
	assert.Equal(t, tail, b[len(b)-len(tail):])
	const at = 4 + 2 + 1 + 2 + 3 + 4 + 4 + 8 // as in TestThrottleTags
	assert.Equal(t, byte(7), b[at], "tag count: the six int64 tags and this one")

	var back connregistry.ListClientConnectionsResponse
	require.NoError(t, back.ReadFrom(b))
	assert.Equal(t, rec.ProxyAddress, back.Connections[0].ProxyAddress)

	none := (&connregistry.ListClientConnectionsResponse{Connections: []connregistry.ConnectionRecord{{ConnectionID: "a"}}}).AppendTo(nil)
	assert.Equal(t, byte(6), none[at], "no proxy address, no tag")
}

// The server name travels as tag 17, a compact string, last, and only
// when there is one; the filters by server name as tag 1 of the list and
// close requests, null meaning none and "" the connections without a name.
func TestServerNameTags(t *testing.T) {
	rec := connregistry.ConnectionRecord{ConnectionID: "a", ServerName: "a.io"}
	b := (&connregistry.ListClientConnectionsResponse{Connections: []connregistry.ConnectionRecord{rec}}).AppendTo(nil)
	tail := []byte{
		17, 5, 5, 'a', '.', 'i', 'o', // ServerName: tag, size, compact string
		0x00, // response: no tagged fields
	}
	require.Greater(t, len(b), len(tail))
	assert.Equal(t, tail, b[len(b)-len(tail):])
	var back connregistry.ListClientConnectionsResponse
	require.NoError(t, back.ReadFrom(b))
	assert.Equal(t, "a.io", back.Connections[0].ServerName)
	// After the load balancer's tag 16: tags go in order.
	both := connregistry.ConnectionRecord{ConnectionID: "a", ProxyAddress: "b:1", ServerName: "a.io"}
	b = (&connregistry.ListClientConnectionsResponse{Connections: []connregistry.ConnectionRecord{both}}).AppendTo(nil)
	tail = []byte{16, 4, 4, 'b', ':', '1', 17, 5, 5, 'a', '.', 'i', 'o', 0x00}
	assert.Equal(t, tail, b[len(b)-len(tail):])
	// Without a name the tag is left out: the record's six int64 tags only.
	b = (&connregistry.ListClientConnectionsResponse{Connections: []connregistry.ConnectionRecord{{ConnectionID: "a"}}}).AppendTo(nil)
	const at = 4 + 2 + 1 + 2 + 3 + 4 + 4 + 8
	assert.Equal(t, byte(6), b[at], "tag count")

	req := &connregistry.ListClientConnectionsRequest{ServerNameFilter: sp("*.a.io"), IncludeClosed: true}
	golden := []byte{
		0x00, 0x00, 0x00, // no KIP-1329 filter
		0x02,          // two tags
		0x00, 0x01, 1, // IncludeClosed
		0x01, 0x07, 0x07, '*', '.', 'a', '.', 'i', 'o', // ServerNameFilter
	}
	assert.Equal(t, golden, req.AppendTo(nil))
	var reqBack connregistry.ListClientConnectionsRequest
	require.NoError(t, reqBack.ReadFrom(golden))
	assert.Equal(t, *req, reqBack)
	empty := &connregistry.ListClientConnectionsRequest{ServerNameFilter: sp("")}
	require.NoError(t, reqBack.ReadFrom(empty.AppendTo(nil)))
	require.NotNil(t, reqBack.ServerNameFilter, "an empty name is a filter, not none")
	assert.Empty(t, *reqBack.ServerNameFilter)

	closeReq := &connregistry.CloseClientConnectionsRequest{ServerNameFilter: sp("b.io")}
	golden = []byte{
		0x00, 0x00, 0x00, // no KIP-1329 filter
		0x01,                                       // no connection ids
		0x01, 0x01, 0x05, 0x05, 'b', '.', 'i', 'o', // one tag: ServerNameFilter
	}
	assert.Equal(t, golden, closeReq.AppendTo(nil))
	var closeBack connregistry.CloseClientConnectionsRequest
	require.NoError(t, closeBack.ReadFrom(golden))
	assert.Equal(t, *closeReq, closeBack)
}

func TestMalformed(t *testing.T) {
	var resp connregistry.ListClientConnectionsResponse
	for _, b := range [][]byte{
		nil, {0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}, {0, 0, 0, 0, 0, 0, 2, 0x7f},
	} {
		assert.Error(t, resp.ReadFrom(b), "%x", b)
	}
	// A peer claiming 2^31 connections in 10 bytes costs next to nothing:
	// what the decoder makes is bounded by the bytes that arrived.
	claim := []byte{0, 0, 0, 0, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x08}
	assert.Error(t, resp.ReadFrom(claim))
	assert.LessOrEqual(t, bytesPerCall(func() { _ = resp.ReadFrom(claim) }), uint64(claimBudget))
	var req connregistry.ListClientConnectionsRequest
	assert.Error(t, req.ReadFrom([]byte{0x05, 'a'}))
}

// claimBudget is the most a decoder may allocate, on average, for a
// message of a few bytes that claims a huge array: its error and what it
// decoded (480 bytes measured for ListClientConnections), less than three
// of the records claimed (a ConnectionRecord is 384 bytes).
const claimBudget = 1 << 10

// bytesPerCall is what f allocates on the heap, on average over 100 calls
// (another goroutine's allocations only add to it).
func bytesPerCall(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 100 {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / 100
}

func FuzzDecode(f *testing.F) {
	f.Add((&connregistry.ListClientConnectionsResponse{Connections: []connregistry.ConnectionRecord{{ConnectionID: "a", State: "ready"}}}).AppendTo(nil))
	f.Add((&connregistry.ListClientConnectionsRequest{PrincipalFilter: sp("User:a"), IncludeClosed: true}).AppendTo(nil))
	f.Add((&connregistry.CloseClientConnectionsRequest{ListenerFilter: sp("CLIENT"), ConnectionIDs: []string{"x"}}).AppendTo(nil))
	f.Add((&connregistry.ListClientConnectionsRequest{ServerNameFilter: sp("*.a.io")}).AppendTo(nil))
	f.Add((&connregistry.CloseClientConnectionsRequest{ServerNameFilter: sp("b.io")}).AppendTo(nil))
	f.Add((&connregistry.ListClientConnectionsResponse{Connections: []connregistry.ConnectionRecord{{ConnectionID: "a", ServerName: "a.io"}}}).AppendTo(nil))
	f.Add((&connregistry.ListClientConnectionsRequest{SortBy: connregistry.SortByRequests, Limit: 10}).AppendTo(nil))
	f.Add((&connregistry.ListClientConnectionsResponse{Connections: []connregistry.ConnectionRecord{{ConnectionID: "a", RequestRate: 1.5, BytesInRate: 3, BytesOutRate: 7}}}).AppendTo(nil))
	f.Add((&connregistry.CloseClientConnectionsResponse{ErrorMessage: sp("m"), Connections: []connregistry.ConnectionRecord{{ConnectionID: "a"}}}).AppendTo(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		var resp connregistry.ListClientConnectionsResponse
		if resp.ReadFrom(b) == nil {
			var again connregistry.ListClientConnectionsResponse
			require.NoError(t, again.ReadFrom(resp.AppendTo(nil)))
			assert.Equal(t, resp.Connections, again.Connections)
			assert.Equal(t, resp.ErrorCode, again.ErrorCode)
		}
		var req connregistry.ListClientConnectionsRequest
		if req.ReadFrom(b) == nil {
			var again connregistry.ListClientConnectionsRequest
			require.NoError(t, again.ReadFrom(req.AppendTo(nil)))
			assert.Equal(t, req, again)
		}
		var closeReq connregistry.CloseClientConnectionsRequest
		if closeReq.ReadFrom(b) == nil {
			var again connregistry.CloseClientConnectionsRequest
			require.NoError(t, again.ReadFrom(closeReq.AppendTo(nil)))
			assert.Equal(t, closeReq, again)
		}
		var closeResp connregistry.CloseClientConnectionsResponse
		if closeResp.ReadFrom(b) == nil {
			var again connregistry.CloseClientConnectionsResponse
			require.NoError(t, again.ReadFrom(closeResp.AppendTo(nil)))
			assert.Equal(t, closeResp.Connections, again.Connections)
			assert.Equal(t, closeResp.ErrorMessage, again.ErrorMessage)
		}
	})
}
