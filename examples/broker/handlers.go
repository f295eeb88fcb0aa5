package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/socketserver"
)

// dataPlaneAPIs are the requests the data-plane listeners serve, at the
// versions the handlers below answer correctly. The record path (Produce,
// Fetch, ListOffsets) and Metadata are answered inline by h, on each
// connection's goroutine (socketserver.Inline): their handlers read or
// append to the in-memory log and answer at once, or hand a long-poll
// Fetch to a goroutine of its own, so the handoffs to a num.io.threads
// worker and back would only add two thread wake-ups to each request. The
// rest, the group coordinator's requests among them, go through the
// request queue to the num.io.threads workers that Serve runs. A nil h
// queues every request.
func dataPlaneAPIs(h socketserver.Handler) []socketserver.API {
	inline := []socketserver.API{
		socketserver.KmsgAPI(kmsg.Produce, 3, 13),    // v3 is the first with record batches (magic 2), the one format stored
		socketserver.KmsgAPI(kmsg.Fetch, 4, 18),      // v4 is the first to return record batches
		socketserver.KmsgAPI(kmsg.ListOffsets, 1, 6), // v0 lists old-style offsets; v7+ add timestamps -3 to -6 (max timestamp, tiered storage)
		socketserver.KmsgAPI(kmsg.Metadata, 0, 13),
	}
	if h != nil {
		inline = socketserver.Inline(h, inline...)
	}
	apis := append(inline,
		socketserver.KmsgAPI(kmsg.InitProducerID, 0, 5),
		socketserver.KmsgAPI(kmsg.DescribeCluster, 0, 2),
		socketserver.KmsgAPI(kmsg.CreateTopics, 0, 7),
		socketserver.KmsgAPI(kmsg.DeleteTopics, 0, 6), // v6 names topics by id too
		// The group coordinator (groups.go): every version kmsg knows.
		// OffsetCommit and OffsetFetch v10 name topics by id; v9 adds
		// nothing a classic group uses.
		socketserver.KmsgAPI(kmsg.FindCoordinator, 0, 6), // v4+ batches keys; v6 adds share groups, refused
		socketserver.KmsgAPI(kmsg.JoinGroup, 0, 9),
		socketserver.KmsgAPI(kmsg.SyncGroup, 0, 5),
		socketserver.KmsgAPI(kmsg.Heartbeat, 0, 4),
		socketserver.KmsgAPI(kmsg.LeaveGroup, 0, 5),
		socketserver.KmsgAPI(kmsg.OffsetCommit, 0, 10),
		socketserver.KmsgAPI(kmsg.OffsetFetch, 0, 10),
		socketserver.KmsgAPI(kmsg.DescribeGroups, 0, 6),
		socketserver.KmsgAPI(kmsg.ListGroups, 0, 5),
	)
	return append(apis, clientQuotaAPIs()...)
}

// controlPlaneAPIs are the requests the control-plane listener serves
// (ApiVersions, which the server answers, aside): Metadata, so that a
// controller learns the control-plane addresses.
func controlPlaneAPIs() []socketserver.API {
	return []socketserver.API{socketserver.KmsgAPI(kmsg.Metadata, 0, 13)}
}

// listConnectionsKeyProperty chooses the API key of ListClientConnections,
// closeConnectionsKeyProperty that of CloseClientConnections.
const (
	listConnectionsKeyProperty  = "kafkanet.list.client.connections.api.key"
	closeConnectionsKeyProperty = "kafkanet.close.client.connections.api.key"
)

// kmsgKnows reports whether kmsg defines key.
func kmsgKnows(key int16) bool { return kmsg.RequestForKey(key) != nil }

// maxPartitions bounds CreateTopics, since every partition lives in memory.
const maxPartitions = 10000

// ServeKafka answers one request; socketserver runs it on the
// connection's goroutine for the APIs dataPlaneAPIs makes inline, and on
// num.io.threads goroutines (one for the control plane) for the rest.
func (b *broker) ServeKafka(r *socketserver.Request) {
	// An inline request may come as soon as the first broker's server has
	// started, before every broker's address is known. A cluster that
	// stops before it was ready closes such a connection; one that is
	// stopping after it was ready still answers (select picks at random
	// among ready cases, hence the second look).
	select {
	case <-b.c.ready:
	case <-b.c.stopping:
		select {
		case <-b.c.ready:
		default:
			_ = r.CloseConnection()
			return
		}
	}
	start := time.Now()
	defer func() { b.recordRequestTime(r, time.Since(start)) }()
	switch req := r.Body.(type) {
	case *kmsg.MetadataRequest:
		b.respond(r, b.metadata(r, req))
	case *kmsg.ProduceRequest:
		b.produce(r, req)
	case *kmsg.FetchRequest:
		b.fetch(r, req)
	case *kmsg.ListOffsetsRequest:
		b.respond(r, b.listOffsets(req))
	case *kmsg.InitProducerIDRequest:
		resp := kmsg.NewPtrInitProducerIDResponse()
		resp.ProducerID, resp.ProducerEpoch = b.c.state.nextProducerID(), 0
		b.respond(r, resp)
	case *kmsg.DescribeClusterRequest:
		b.respond(r, b.describeCluster(r, req))
	case *kmsg.CreateTopicsRequest:
		b.respond(r, b.createTopics(req))
	case *kmsg.DeleteTopicsRequest:
		b.respond(r, b.deleteTopics(req))
	case *kmsg.FindCoordinatorRequest:
		b.respond(r, b.findCoordinator(r, req))
	case *kmsg.JoinGroupRequest:
		b.joinGroup(r, req)
	case *kmsg.SyncGroupRequest:
		b.syncGroup(r, req)
	case *kmsg.HeartbeatRequest:
		b.respond(r, b.heartbeat(req))
	case *kmsg.LeaveGroupRequest:
		b.respond(r, b.leaveGroup(req))
	case *kmsg.OffsetCommitRequest:
		b.respond(r, b.offsetCommit(req))
	case *kmsg.OffsetFetchRequest:
		b.respond(r, b.offsetFetch(req))
	case *kmsg.DescribeGroupsRequest:
		b.respond(r, b.describeGroups(req))
	case *kmsg.ListGroupsRequest:
		b.respond(r, b.listGroups(req))
	case *kmsg.DescribeClientQuotasRequest:
		b.respond(r, b.describeClientQuotas(r, req))
	case *kmsg.AlterClientQuotasRequest:
		b.respond(r, b.alterClientQuotas(r, req))
	default: // not reached: the server passes on only the APIs enabled
		_ = r.CloseConnection()
	}
}

// respond answers r with resp. Respond fails only for a response of another
// API, or a second answer: a bug in this file.
func (b *broker) respond(r *socketserver.Request, resp kmsg.Response) {
	if err := r.Respond(resp); err != nil {
		b.c.log.Error("cannot answer request", "conn_id", r.Conn.ID, "api_key", r.APIKey, "err", err)
		_ = r.CloseConnection()
	}
}

// lookup finds a topic by id (byID) or by name; nil when there is none.
func (b *broker) lookup(name string, id [16]byte, byID bool) *topic {
	if byID {
		return b.c.state.topicByID(id)
	}
	return b.c.state.topic(name)
}

// partitionError says why b cannot serve partition p of t, nil if it can:
// t is unknown (t nil), p is not one of its partitions, or b does not lead
// it.
func (b *broker) partitionError(t *topic, p int32, byID bool) error {
	switch {
	case t == nil && byID:
		return kerr.UnknownTopicID
	case t == nil || p < 0 || int(p) >= len(t.partitions):
		return kerr.UnknownTopicOrPartition
	case b.c.leader(p) != b.id:
		return kerr.NotLeaderForPartition
	}
	return nil
}

func (b *broker) metadata(r *socketserver.Request, req *kmsg.MetadataRequest) *kmsg.MetadataResponse {
	resp := kmsg.NewPtrMetadataResponse()
	// Addresses on the listener the client came through (KIP-103).
	resp.Brokers = socketserver.MetadataBrokers(r.Conn.Listener, b.c.brokerInfos())
	resp.ClusterID = kmsg.StringPtr(b.c.id)
	resp.ControllerID = b.c.controllerID()
	if req.Topics == nil || req.Version == 0 && len(req.Topics) == 0 { // every topic
		for _, t := range b.c.state.allTopics() {
			resp.Topics = append(resp.Topics, b.topicMetadata(t))
		}
		return resp
	}
	autoCreate := b.c.settings.autoCreate && (req.Version < 4 || req.AllowAutoTopicCreation)
	for _, rt := range req.Topics {
		var t *topic
		var err error
		switch {
		case rt.Topic == nil: // by id (v10+)
			if t = b.c.state.topicByID(rt.TopicID); t == nil {
				err = kerr.UnknownTopicID
			}
		case autoCreate && *rt.Topic == offsetsTopicName: // created as FindCoordinator creates it
			t, err = b.c.createOffsetsTopic()
		case autoCreate:
			t, err = b.c.state.createTopic(*rt.Topic, b.c.settings.numPartitions, 1, b.c.settings.log.defaults, false)
			if errors.Is(err, kerr.TopicAlreadyExists) {
				err = nil
			}
		default:
			if t = b.c.state.topic(*rt.Topic); t == nil {
				err = kerr.UnknownTopicOrPartition
			}
		}
		if err != nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.TopicID, mt.ErrorCode = rt.Topic, rt.TopicID, errorCode(err)
			mt.IsInternal = rt.Topic != nil && socketserver.IsInternalTopic(*rt.Topic)
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, b.topicMetadata(t))
	}
	return resp
}

func (b *broker) topicMetadata(t *topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	// Internal by name, as Kafka's Topic.isInternal: clients leave such
	// topics out of regular-expression subscriptions.
	mt.Topic, mt.TopicID, mt.IsInternal = kmsg.StringPtr(t.name), t.id, socketserver.IsInternalTopic(t.name)
	for p := range int32(len(t.partitions)) {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.Leader, mp.LeaderEpoch = p, b.c.leader(p), 0
		mp.Replicas = b.c.replicas(t, p)
		mp.ISR = mp.Replicas
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

func (b *broker) produce(r *socketserver.Request, req *kmsg.ProduceRequest) {
	resp := kmsg.NewPtrProduceResponse()
	failed := false
	byID := req.Version >= 13
	for _, rt := range req.Topics {
		t := b.lookup(rt.Topic, rt.TopicID, byID)
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			err := b.partitionError(t, rp.Partition, byID)
			if err == nil && req.Acks != 0 && req.Acks != 1 && req.Acks != -1 {
				err = kerr.InvalidRequiredAcks
			}
			var batches []batch
			if err == nil {
				batches, err = splitBatches(rp.Records)
			}
			if err == nil {
				err = checkBatchSizes(t.log, batches)
			}
			if err == nil {
				detachSmall(batches, r.Size)
			}
			if err == nil {
				sp.BaseOffset, sp.LogStartOffset, err = b.c.state.append(t, rp.Partition, batches)
			}
			if err != nil {
				failed = true
				sp.ErrorCode, sp.ErrorMessage = errorCode(err), kmsg.StringPtr(err.Error())
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	// Throttled by the client's producer_byte_rate and request_percentage
	// quotas, acks=0 too (its connection is muted), as in Kafka.
	d := b.produceThrottle(r, r.Size)
	switch {
	case req.Acks != 0:
		b.respondThrottled(r, resp, d)
	case failed:
		// The client reads no response; closing the connection makes it
		// refresh its metadata, as Kafka does.
		_ = r.CloseConnection()
	default:
		b.throttle(r, d) // muted at once
		_ = r.NoResponse()
	}
}

// fetch answers a Fetch at once when records or errors are there to return,
// else waits up to MaxWaitMillis for records on another goroutine, so that
// the handler goroutine serves other requests meanwhile.
func (b *broker) fetch(r *socketserver.Request, req *kmsg.FetchRequest) {
	if req.Version >= 7 && req.SessionID != 0 { // this broker creates no fetch sessions
		resp := kmsg.NewPtrFetchResponse()
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		b.respond(r, resp)
		return
	}
	b.fetchMaxBytes(r, req)
	wake := b.c.state.wakeup() // before reading, so that no append is missed
	resp, size, failed := b.readFetch(req)
	if size > 0 || failed || req.MaxWaitMillis <= 0 || req.MinBytes <= 0 {
		b.respondFetch(r, resp, size)
		return
	}
	b.c.waiting.Go(func() { b.longPoll(r, req, wake) })
}

// longPoll answers req when records arrive for it or one of its partitions
// fails (its topic was deleted), its wait expires, the cluster stops (with
// what there is), or stops waiting when its connection closes.
func (b *broker) longPoll(r *socketserver.Request, req *kmsg.FetchRequest, wake <-chan struct{}) {
	timer := time.NewTimer(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	defer timer.Stop()
	for {
		select {
		case <-wake:
			wake = b.c.state.wakeup()
			if resp, size, failed := b.readFetch(req); size > 0 || failed {
				b.respondFetch(r, resp, size)
				return
			}
			continue // the records were for other partitions
		case <-timer.C:
		case <-b.c.stopping:
		case <-r.Context().Done():
			// The client has gone (its EOF), or the connection closed:
			// close rather than wait out MaxWaitMillis for no one. After
			// the client's EOF the close is the client's, as the
			// registry lists it.
			_ = r.CloseConnection()
			return
		}
		resp, size, _ := b.readFetch(req)
		b.respondFetch(r, resp, size)
		return
	}
}

// readFetch builds the answer to req from what is stored now, with the
// bytes of records it holds and whether a partition has an error. Records
// are limited loosely: each partition gets up to PartitionMaxBytes but at
// least one batch, and partitions after MaxBytes is reached get none. The
// stored batches travel by reference (socketserver.FetchResponse): the
// socket server writes them from the log, without a copy.
func (b *broker) readFetch(req *kmsg.FetchRequest) (resp *socketserver.FetchResponse, size int, failed bool) {
	resp = &socketserver.FetchResponse{FetchResponse: kmsg.NewPtrFetchResponse()}
	byID := req.Version >= 13
	for _, rt := range req.Topics {
		t := b.lookup(rt.Topic, rt.TopicID, byID)
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		records := make([]socketserver.FetchRecords, 0, len(rt.Partitions))
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			// Empty, not null: librdkafka rejects null records.
			sp.Partition, sp.RecordBatches = rp.Partition, []byte{}
			var recs socketserver.FetchRecords
			err := b.partitionError(t, rp.Partition, byID)
			if err == nil {
				limit := int(rp.PartitionMaxBytes)
				if req.Version >= 3 && size >= int(req.MaxBytes) {
					limit = 0
				}
				var n int
				recs.Batches, n, sp.HighWatermark, sp.LogStartOffset, err = b.c.state.readBatches(t, rp.Partition, rp.FetchOffset, limit, nil)
				sp.LastStableOffset = sp.HighWatermark
				size += n
			}
			if err != nil {
				failed = true
				sp.ErrorCode = errorCode(err)
			}
			st.Partitions = append(st.Partitions, sp)
			records = append(records, recs)
		}
		resp.Topics = append(resp.Topics, st)
		resp.Records = append(resp.Records, records)
	}
	return resp, size, failed
}

func (b *broker) listOffsets(req *kmsg.ListOffsetsRequest) *kmsg.ListOffsetsResponse {
	resp := kmsg.NewPtrListOffsetsResponse()
	for _, rt := range req.Topics {
		t := b.c.state.topic(rt.Topic)
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition, sp.LeaderEpoch = rp.Partition, 0
			err := b.partitionError(t, rp.Partition, false)
			if err == nil {
				switch ts := rp.Timestamp; {
				case ts == -1: // latest
					sp.Offset = b.c.state.highWatermark(t, rp.Partition)
				case ts == -2: // earliest: the log start offset, which retention advances
					sp.Offset = b.c.state.logStart(t, rp.Partition)
				case ts >= 0:
					sp.Offset = b.c.state.offsetForTimestamp(t, rp.Partition, ts)
				default:
					err = fmt.Errorf("%w: timestamp %d", kerr.InvalidRequest, ts)
				}
			}
			sp.ErrorCode = errorCode(err)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func (b *broker) describeCluster(r *socketserver.Request, req *kmsg.DescribeClusterRequest) *kmsg.DescribeClusterResponse {
	resp := kmsg.NewPtrDescribeClusterResponse()
	resp.EndpointType = req.EndpointType
	if req.Version >= 1 && req.EndpointType != 1 { // 1 asks for brokers, 2 for KRaft controllers
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		return resp
	}
	resp.ClusterID = b.c.id
	resp.ControllerID = b.c.controllerID()
	resp.Brokers = socketserver.DescribeClusterBrokers(r.Conn.Listener, b.c.brokerInfos())
	return resp
}
