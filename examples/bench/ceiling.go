package main

// This file is the ceiling of consuming (scenario g), a child: a host of
// socketserver that builds a log at start and answers each Fetch with its
// batches by reference (socketserver.FetchResponse), from memory with
// writev or from a file with sendfile, doing nothing else per request.

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/socketserver"
)

// largeTopic is scenario g's topic: one partition.
const largeTopic = "bench-large"

// largeTopicID is the ceiling's id of largeTopic.
var largeTopicID = [16]byte{'k', 'a', 'f', 'k', 'a', 'n', 'e', 't', '-', 'c', 'e', 'i', 'l', 'i', 'n', 'g'}

// ceilingLog is partition 0 of largeTopic: batches in memory, or in a
// file.
type ceilingLog struct {
	batches [][]byte
	next    []int64 // next[i]: the offset after batch i
	pos     []int64 // pos[i]: where batch i starts in file
	file    *os.File
}

// buildCeilingLog builds a log of n records of size bytes, batched as a
// producer with a batch limit of producerBatchMax(size) batches them when
// records come faster than it sends, in a temporary file (removed at once:
// it lives until it is closed). With inMemory it then reads the file into
// memory and closes it: the batches are in memory that the kernel filled,
// as a broker's log is filled from its sockets (on some virtual machines
// the kernel's first access to a page of a process costs several times a
// later one: a log built in place would make writev look dearer than a
// broker pays). Otherwise the log stays in the file, for sendfile.
func buildCeilingLog(n, size int, inMemory bool) (*ceilingLog, error) {
	pool, err := randomValues(max(1, (1<<20)/size), size)
	if err != nil {
		return nil, err
	}
	l := &ceilingLog{}
	if l.file, err = os.CreateTemp("", "kafkanet-bench-ceiling-"); err != nil {
		return nil, err
	}
	os.Remove(l.file.Name())
	per := batchRecords(size, int(producerBatchMax(size)))
	now := time.Now().UnixMilli()
	var values [][]byte
	var b []byte
	var pos int64
	for done := 0; done < n; {
		values = values[:0]
		for i := 0; i < per && done+i < n; i++ {
			values = append(values, pool[(done+i)%len(pool)])
		}
		b = appendBatch(b[:0], int64(done), now, values)
		done += len(values)
		l.next = append(l.next, int64(done))
		if _, err := l.file.Write(b); err != nil {
			l.file.Close()
			return nil, fmt.Errorf("writing the ceiling's log: %w", err)
		}
		l.pos = append(l.pos, pos)
		pos += int64(len(b))
	}
	l.pos = append(l.pos, pos)
	if !inMemory {
		return l, nil
	}
	defer l.file.Close()
	all := make([]byte, pos)
	if _, err := l.file.ReadAt(all, 0); err != nil {
		return nil, fmt.Errorf("reading the ceiling's log: %w", err)
	}
	for i := range l.next {
		l.batches = append(l.batches, all[l.pos[i]:l.pos[i+1]:l.pos[i+1]])
	}
	l.file, l.pos = nil, nil
	return l, nil
}

// highWatermark is the offset after the last record.
func (l *ceilingLog) highWatermark() int64 {
	if len(l.next) == 0 {
		return 0
	}
	return l.next[len(l.next)-1]
}

// read returns the records from offset on, up to maxBytes but at least one
// batch, as Kafka limits a partition's records, and their size.
func (l *ceilingLog) read(offset int64, maxBytes int) (socketserver.FetchRecords, int) {
	first := sort.Search(len(l.next), func(i int) bool { return l.next[i] > offset })
	last, size := first, 0
	for ; last < len(l.next); last++ {
		n := l.batchLen(last)
		if size > 0 && size+n > maxBytes {
			break
		}
		size += n
	}
	if l.file != nil {
		return socketserver.FetchRecords{File: l.file, Offset: l.pos[first], Length: int64(size)}, size
	}
	return socketserver.FetchRecords{Batches: l.batches[first:last:last]}, size
}

func (l *ceilingLog) batchLen(i int) int {
	if l.file != nil {
		return int(l.pos[i+1] - l.pos[i])
	}
	return len(l.batches[i])
}

// ceilingHandler answers Metadata, ListOffsets and Fetch for largeTopic
// from its log; ApiVersions is the server's.
type ceilingHandler struct {
	ctx      context.Context
	log      *ceilingLog
	metadata *kmsg.MetadataResponse
}

// ceilingAPIs are the ceiling's APIs, answered inline by h. Fetch v4 is
// the first with record batches; the versions are the example broker's.
func ceilingAPIs(h socketserver.Handler) []socketserver.API {
	api := socketserver.KmsgAPI
	return socketserver.Inline(h, api(kmsg.Metadata, 0, 12), api(kmsg.ListOffsets, 1, 6), api(kmsg.Fetch, 4, 18))
}

// ServeKafka answers one request.
func (h *ceilingHandler) ServeKafka(r *socketserver.Request) {
	var resp kmsg.Response
	switch req := r.Body.(type) {
	case *kmsg.MetadataRequest:
		m := *h.metadata
		resp = &m
	case *kmsg.ListOffsetsRequest:
		resp = h.listOffsets(req)
	case *kmsg.FetchRequest:
		f, size := h.fetch(req)
		if size == 0 && req.MaxWaitMillis > 0 {
			// At the end of the log: answer when the wait is over, as a
			// broker would with nothing appended meanwhile.
			stop := context.AfterFunc(h.ctx, func() { _ = r.Respond(f) })
			time.AfterFunc(time.Duration(req.MaxWaitMillis)*time.Millisecond, func() {
				if stop() {
					_ = r.Respond(f)
				}
			})
			return
		}
		resp = f
	default:
		_ = r.CloseConnection()
		return
	}
	if err := r.Respond(resp); err != nil {
		_ = r.CloseConnection()
	}
}

// listOffsets answers the earliest (0) and latest (the high watermark)
// offsets of partition 0.
func (h *ceilingHandler) listOffsets(req *kmsg.ListOffsetsRequest) *kmsg.ListOffsetsResponse {
	resp := kmsg.NewPtrListOffsetsResponse()
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition, sp.LeaderEpoch = rp.Partition, 0
			switch {
			case rt.Topic != largeTopic || rp.Partition != 0:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case rp.Timestamp == -1:
				sp.Offset = h.log.highWatermark()
			default:
				sp.Offset = 0
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// fetch answers a Fetch from the log, by reference, with the bytes of
// records it carries.
func (h *ceilingHandler) fetch(req *kmsg.FetchRequest) (*socketserver.FetchResponse, int) {
	resp := &socketserver.FetchResponse{FetchResponse: kmsg.NewPtrFetchResponse()}
	hw := h.log.highWatermark()
	total := 0
	for _, rt := range req.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		records := make([]socketserver.FetchRecords, len(rt.Partitions))
		ours := rt.Topic == largeTopic || req.Version >= 13 && rt.TopicID == largeTopicID
		for i, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition, sp.RecordBatches = rp.Partition, []byte{}
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = hw, hw, 0
			switch {
			case !ours || rp.Partition != 0:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case rp.FetchOffset < 0 || rp.FetchOffset > hw:
				sp.ErrorCode = kerr.OffsetOutOfRange.Code
			case rp.FetchOffset < hw && total < int(req.MaxBytes):
				var n int
				records[i], n = h.log.read(rp.FetchOffset, int(rp.PartitionMaxBytes))
				total += n
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
		resp.Records = append(resp.Records, records)
	}
	return resp, total
}

// serveCeiling runs a ceiling until ctx ends: ceiling-writev answers from
// memory, ceiling-sendfile from a file.
func serveCeiling(ctx context.Context, spec childSpec) error {
	log, churn, err := childLog(spec, spec.Kind == ceilingWritevServer)
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(churn)
	if log.file != nil {
		defer log.file.Close()
	}
	cfg, err := config.Server(config.Properties{
		config.KeyListeners:               clientListener + "://" + spec.Addr,
		config.KeySecurityProtocolMap:     clientListener + ":PLAINTEXT",
		config.KeyInterBrokerListenerName: clientListener,
	})
	if err != nil {
		return err
	}
	h := &ceilingHandler{ctx: ctx, log: log}
	if h.metadata, err = ceilingMetadata(spec.Addr); err != nil {
		return err
	}
	cfg.APIs = ceilingAPIs(h)
	// The operating system's socket buffers, as the example broker's and
	// kfake's.
	cfg.SendBufferBytes, cfg.ReceiveBufferBytes = -1, -1
	srv, err := socketserver.New(cfg)
	if err != nil {
		return err
	}
	if err := srv.Start(ctx); err != nil {
		return err
	}
	defer srv.Close()
	<-ctx.Done()
	return nil
}

// ceilingMetadata is the ceiling's Metadata response: itself as node 0 at
// addr, leading the one partition of largeTopic.
func ceilingMetadata(addr string) (*kmsg.MetadataResponse, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, fmt.Errorf("port %q: %w", port, err)
	}
	resp := kmsg.NewPtrMetadataResponse()
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = 0, host, int32(p)
	resp.Brokers = []kmsg.MetadataResponseBroker{b}
	resp.ClusterID = kmsg.StringPtr("kafkanet-bench-ceiling")
	resp.ControllerID = 0
	t := kmsg.NewMetadataResponseTopic()
	t.Topic, t.TopicID = kmsg.StringPtr(largeTopic), largeTopicID
	part := kmsg.NewMetadataResponseTopicPartition()
	part.Partition, part.Leader, part.LeaderEpoch, part.Replicas, part.ISR = 0, 0, 0, []int32{0}, []int32{0}
	t.Partitions = []kmsg.MetadataResponseTopicPartition{part}
	resp.Topics = []kmsg.MetadataResponseTopic{t}
	return resp, nil
}

// childLog builds the log of a ceiling's or floor's spec (see
// buildCeilingLog), then writes the other memory its ChurnMB asks for,
// which the caller keeps alive while it serves.
func childLog(spec childSpec, inMemory bool) (*ceilingLog, [][]byte, error) {
	if spec.Records < 1 || spec.RecordSize < 1 {
		return nil, nil, fmt.Errorf("%s needs -records and -record-size", spec.Kind)
	}
	log, err := buildCeilingLog(spec.Records, spec.RecordSize, inMemory)
	if err != nil {
		return nil, nil, err
	}
	return log, churnMemory(spec.ChurnMB), nil
}

// churnMemory writes mb MiB of memory, a byte in each page, and returns
// it: a ceiling or floor that keeps it serves its log as a broker serves
// one that its produce requests filled while much else was written, not
// as the last memory it touched.
func churnMemory(mb int) [][]byte {
	churn := make([][]byte, max(mb, 0))
	for i := range churn {
		churn[i] = make([]byte, 1<<20)
		for j := 0; j < len(churn[i]); j += 4096 {
			churn[i][j] = 1
		}
	}
	return churn
}
