package main

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
)

// fakeBook serves nodes 0 to 2 on proxy.example, port 9100+id per
// listener index; node 3 cannot be served.
type fakeBook struct {
	learned map[int32]string
}

func (b *fakeBook) learn(id int32, host string, port int32) {
	if b.learned == nil {
		b.learned = map[int32]string{}
	}
	b.learned[id] = fmt.Sprintf("%s:%d", host, port)
}

func (b *fakeBook) endpoint(l protocolmap.ListenerName, id int32) (string, int32, bool) {
	if id < 0 || id > 2 {
		return "", 0, false
	}
	base := int32(9100)
	if l == "SECURE" {
		base = 9200
	}
	return "proxy.example", base + id, true
}

// Every response that carries broker addresses names the proxy's, on the
// client's listener; brokers the proxy cannot serve are left out, a
// coordinator it cannot serve becomes COORDINATOR_NOT_AVAILABLE, and the
// upstream addresses are learned.
func TestRewrite(t *testing.T) {
	up := func(id int32) (string, int32) { return "upstream.example", 9092 + id }
	t.Run("Metadata", func(t *testing.T) {
		resp := kmsg.NewPtrMetadataResponse()
		for id := range int32(4) {
			b := kmsg.NewMetadataResponseBroker()
			b.NodeID = id
			b.Host, b.Port = up(id)
			resp.Brokers = append(resp.Brokers, b)
		}
		book := &fakeBook{}
		rewrite(resp, "SECURE", book)
		require.Len(t, resp.Brokers, 3, "node 3 cannot be served")
		for i, b := range resp.Brokers {
			assert.Equal(t, int32(i), b.NodeID)
			assert.Equal(t, "proxy.example", b.Host)
			assert.Equal(t, int32(9200+i), b.Port)
		}
		assert.Equal(t, "upstream.example:9095", book.learned[3])
	})
	t.Run("DescribeCluster", func(t *testing.T) {
		resp := kmsg.NewPtrDescribeClusterResponse()
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID = 1
		b.Host, b.Port = up(1)
		resp.Brokers = append(resp.Brokers, b)
		rewrite(resp, "PLAIN", &fakeBook{})
		assert.Equal(t, "proxy.example", resp.Brokers[0].Host)
		assert.Equal(t, int32(9101), resp.Brokers[0].Port)
	})
	t.Run("FindCoordinator v3", func(t *testing.T) {
		resp := kmsg.NewPtrFindCoordinatorResponse()
		resp.Version, resp.NodeID = 3, 2
		resp.Host, resp.Port = up(2)
		rewrite(resp, "PLAIN", &fakeBook{})
		assert.Equal(t, "proxy.example", resp.Host)
		assert.Equal(t, int32(9102), resp.Port)

		resp.NodeID = 3
		resp.Host, resp.Port = up(3)
		rewrite(resp, "PLAIN", &fakeBook{})
		assert.Equal(t, kerr.CoordinatorNotAvailable.Code, resp.ErrorCode)
		assert.Equal(t, int32(-1), resp.NodeID)
		assert.Empty(t, resp.Host)
	})
	t.Run("FindCoordinator v4", func(t *testing.T) {
		resp := kmsg.NewPtrFindCoordinatorResponse()
		resp.Version = 4
		for _, id := range []int32{0, 3, -1} {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.NodeID = id
			c.Host, c.Port = up(id)
			if id < 0 {
				c.ErrorCode = kerr.CoordinatorLoadInProgress.Code
			}
			resp.Coordinators = append(resp.Coordinators, c)
		}
		rewrite(resp, "PLAIN", &fakeBook{})
		assert.Equal(t, "proxy.example", resp.Coordinators[0].Host)
		assert.Equal(t, kerr.CoordinatorNotAvailable.Code, resp.Coordinators[1].ErrorCode)
		assert.Equal(t, kerr.CoordinatorLoadInProgress.Code, resp.Coordinators[2].ErrorCode, "upstream's error stays")
		for _, c := range resp.Coordinators[1:] {
			assert.Empty(t, c.Host)
			assert.Equal(t, int32(-1), c.Port)
		}
	})
	t.Run("leader hints", func(t *testing.T) {
		produce := kmsg.NewPtrProduceResponse()
		pb := kmsg.NewProduceResponseBroker()
		pb.NodeID = 0
		pb.Host, pb.Port = up(0)
		produce.Brokers = append(produce.Brokers, pb)
		fetch := kmsg.NewPtrFetchResponse()
		fb := kmsg.NewFetchResponseBroker()
		fb.NodeID = 3
		fb.Host, fb.Port = up(3)
		fetch.Brokers = append(fetch.Brokers, fb)
		share := kmsg.NewPtrShareFetchResponse()
		sb := kmsg.NewShareFetchResponseNodeEndpoint()
		sb.NodeID = 1
		sb.Host, sb.Port = up(1)
		share.NodeEndpoints = append(share.NodeEndpoints, sb)
		ack := kmsg.NewPtrShareAcknowledgeResponse()
		ab := kmsg.NewShareAcknowledgeResponseNodeEndpoint()
		ab.NodeID = 2
		ab.Host, ab.Port = up(2)
		ack.NodeEndpoints = append(ack.NodeEndpoints, ab)
		for _, r := range []kmsg.Response{produce, fetch, share, ack} {
			rewrite(r, "PLAIN", &fakeBook{})
		}
		assert.Equal(t, "proxy.example", produce.Brokers[0].Host)
		assert.Empty(t, fetch.Brokers, "node 3 is left out")
		assert.Equal(t, int32(9101), share.NodeEndpoints[0].Port)
		assert.Equal(t, int32(9102), ack.NodeEndpoints[0].Port)
	})
}

// Every kmsg response type whose structs hold a broker's Host and Port is
// either rewritten (TestRewrite covers each) or never forwarded: a decoded
// API, a raw API whose answers are decoded from the version that added
// the addresses (Produce), or one served only below that version (Fetch).
// A kmsg upgrade that adds addresses to another response fails here until
// the proxy handles it. Host fields that are not brokers' (the member's
// ClientHost, ACL hosts, Kafka Streams application endpoints) do not
// count.
func TestEveryAddressIsRewritten(t *testing.T) {
	rewritten := map[kmsg.Key]bool{}
	for k := range decodedAPIs {
		rewritten[k] = true
	}
	for k := range answerDecodedFrom {
		rewritten[k] = true
	}
	for k := range rawVersionCaps {
		rewritten[k] = true
	}
	notBrokers := map[string]bool{ // API.struct: Kafka Streams applications' endpoints
		"StreamsGroupHeartbeat.Endpoint":                                           true,
		"StreamsGroupDescribe.Endpoint":                                            true,
		"StreamsGroupDescribe.StreamsGroupDescribeResponseGroupMemberUserEndpoint": true,
	}
	var withAddresses []string
	for key := int16(0); key < 1000; key++ {
		resp := kmsg.ResponseForKey(key)
		if resp == nil {
			continue
		}
		for _, name := range hostPortStructs(reflect.TypeOf(resp), map[reflect.Type]bool{}) {
			if notBrokers[kmsg.NameForKey(key)+"."+name] {
				continue
			}
			withAddresses = append(withAddresses, kmsg.NameForKey(key))
			_, dropped := notForwarded[kmsg.Key(key)]
			assert.True(t, rewritten[kmsg.Key(key)] || dropped, "%s (%s) carries broker addresses but is forwarded as it is", kmsg.NameForKey(key), name)
		}
	}
	assert.Contains(t, withAddresses, "Metadata", "the scan finds addresses")
	for _, k := range []kmsg.Key{kmsg.Produce, kmsg.Fetch, kmsg.Metadata, kmsg.FindCoordinator, kmsg.DescribeCluster, kmsg.ShareFetch, kmsg.ShareAcknowledge} {
		assert.Contains(t, withAddresses, kmsg.NameForKey(int16(k)), "the scan finds %s's addresses", kmsg.NameForKey(int16(k)))
	}
}

// The forwarded APIs: those whose answers name brokers decoded, the rest
// raw; Fetch only below v16, whose answers name brokers (KIP-951); a
// Produce's large body streamed.
func TestForwardedAPIs(t *testing.T) {
	upstream := map[int16]versionRange{}
	for key := int16(0); key < 100; key++ {
		if req := kmsg.RequestForKey(key); req != nil {
			upstream[key] = versionRange{0, req.MaxVersion() + 5} // newer than kmsg knows
		}
	}
	set := settings{listKey: 93, closeKey: 1093}
	apis := forwardedAPIs(upstream, set, socketserver.HandlerFunc(func(*socketserver.Request) {}))
	byKey := map[kmsg.Key]socketserver.API{}
	for _, a := range apis {
		byKey[kmsg.Key(a.Key)] = a
		require.NotNil(t, a.Inline, "key %d", a.Key)
		req := kmsg.RequestForKey(a.Key)
		assert.LessOrEqual(t, a.MaxVersion, req.MaxVersion(), "%s beyond what kmsg knows", kmsg.NameForKey(a.Key))
		assert.Equal(t, !decodedAPIs[kmsg.Key(a.Key)], a.Raw, "%s raw", kmsg.NameForKey(a.Key))
		_, dropped := notForwarded[kmsg.Key(a.Key)]
		assert.False(t, dropped, "%s is forwarded", kmsg.NameForKey(a.Key))
	}
	require.Contains(t, byKey, kmsg.Fetch)
	assert.Equal(t, int16(15), byKey[kmsg.Fetch].MaxVersion)
	assert.Equal(t, streamProduceAbove, byKey[kmsg.Produce].StreamAbove)
	assert.Zero(t, byKey[kmsg.Fetch].StreamAbove)
	for _, k := range []kmsg.Key{kmsg.Metadata, kmsg.FindCoordinator, kmsg.DescribeCluster} {
		assert.False(t, byKey[k].Raw, "%s", kmsg.NameForKey(int16(k)))
	}
	assert.NotContains(t, byKey, kmsg.Key(93))
}

// hostPortStructs returns the names of the struct types under t that have
// both a Host and a Port field.
func hostPortStructs(t reflect.Type, seen map[reflect.Type]bool) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return nil
	}
	seen[t] = true
	var out []string
	_, host := t.FieldByName("Host")
	_, port := t.FieldByName("Port")
	if host && port && !strings.HasSuffix(t.Name(), "Request") {
		out = append(out, t.Name())
	}
	for i := range t.NumField() {
		out = append(out, hostPortStructs(t.Field(i).Type, seen)...)
	}
	return out
}
