package main

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/socketserver"
)

// versionRange is the versions of one API a broker supports.
type versionRange struct{ min, max int16 }

// intersect returns the APIs both a and b support, at the versions both
// support.
func intersect(a, b map[int16]versionRange) map[int16]versionRange {
	out := map[int16]versionRange{}
	for key, ra := range a {
		rb, ok := b[key]
		if !ok {
			continue
		}
		r := versionRange{max(ra.min, rb.min), min(ra.max, rb.max)}
		if r.min <= r.max {
			out[key] = r
		}
	}
	return out
}

// notForwarded are the API keys the proxy never forwards, with why:
// ApiVersions and the SASL exchange are the proxy's own (the socket server
// answers them), and the rest are spoken among brokers and controllers
// (replication, KRaft, share-group state), never by clients, or answer
// with controller addresses the proxy cannot serve (DescribeQuorum).
var notForwarded = map[kmsg.Key]string{
	kmsg.SASLHandshake:              "SASL is terminated at the proxy",
	kmsg.SASLAuthenticate:           "SASL is terminated at the proxy",
	kmsg.ApiVersions:                "answered by the proxy, from the versions it forwards",
	kmsg.LeaderAndISR:               "inter-broker",
	kmsg.StopReplica:                "inter-broker",
	kmsg.UpdateMetadata:             "inter-broker",
	kmsg.ControlledShutdown:         "inter-broker",
	kmsg.WriteTxnMarkers:            "inter-broker",
	kmsg.Vote:                       "KRaft",
	kmsg.BeginQuorumEpoch:           "KRaft",
	kmsg.EndQuorumEpoch:             "KRaft",
	kmsg.DescribeQuorum:             "answers with the controllers' addresses",
	kmsg.AlterPartition:             "KRaft",
	kmsg.Envelope:                   "inter-broker",
	kmsg.FetchSnapshot:              "KRaft",
	kmsg.BrokerRegistration:         "KRaft",
	kmsg.BrokerHeartbeat:            "KRaft",
	kmsg.AllocateProducerIDs:        "KRaft",
	kmsg.ControllerRegistration:     "KRaft",
	kmsg.AssignReplicasToDirs:       "KRaft",
	kmsg.AddRaftVoter:               "KRaft",
	kmsg.RemoveRaftVoter:            "KRaft",
	kmsg.UpdateRaftVoter:            "KRaft",
	kmsg.UnregisterController:       "KRaft",
	kmsg.InitializeShareGroupState:  "share-group state, inter-broker",
	kmsg.ReadShareGroupState:        "share-group state, inter-broker",
	kmsg.WriteShareGroupState:       "share-group state, inter-broker",
	kmsg.DeleteShareGroupState:      "share-group state, inter-broker",
	kmsg.ReadShareGroupStateSummary: "share-group state, inter-broker",
}

// forwardedAPIs returns the APIs the data listeners serve, each answered
// by h: every API the upstream brokers and kmsg both know, at the versions
// both support, except those never forwarded and the proxy's own
// ListClientConnections and CloseClientConnections keys (served on the
// admin listener only: upstream's answer would list upstream's
// connections, with upstream addresses). The APIs whose answers name
// brokers are decoded (decodedAPIs), the others served raw (raw.go), at
// most at the versions whose answers name none (rawVersionCaps); a
// Produce's body is streamed above streamProduceAbove. Versions kmsg does
// not know are not served, raw or not: the proxy could not tell whether
// their answers name brokers. The socket server answers ApiVersions from
// this list, so a client never sends what upstream does not support.
func forwardedAPIs(upstream map[int16]versionRange, set settings, h socketserver.Handler) []socketserver.API {
	var decoded, raw []socketserver.API
	for key, r := range upstream {
		k := kmsg.Key(key)
		if _, no := notForwarded[k]; no || key == set.listKey || key == set.closeKey {
			continue
		}
		req := kmsg.RequestForKey(key)
		if req == nil {
			continue // kmsg does not know it
		}
		hi := min(r.max, req.MaxVersion())
		if c, ok := rawVersionCaps[k]; ok && !decodedAPIs[k] {
			hi = min(hi, c)
		}
		if r.min < 0 || r.min > hi {
			continue
		}
		if decodedAPIs[k] {
			decoded = append(decoded, socketserver.KmsgAPI(k, r.min, hi))
			continue
		}
		a := socketserver.API{Key: key, MinVersion: r.min, MaxVersion: hi, Pipeline: pipelineDepth}
		if k == kmsg.Produce {
			a.StreamAbove = streamProduceAbove
		}
		raw = append(raw, a)
	}
	apis := append(decoded, socketserver.Raw(raw...)...)
	slices.SortFunc(apis, func(a, b socketserver.API) int { return int(a.Key) - int(b.Key) })
	return socketserver.Inline(h, apis...)
}
