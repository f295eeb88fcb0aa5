package main

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// decodeBatch decodes a record batch with kmsg, checks its length and
// CRC-32C, and returns its header and its records' values.
func decodeBatch(t *testing.T, raw []byte) (kmsg.RecordBatch, [][]byte) {
	t.Helper()
	var b kmsg.RecordBatch
	if err := b.ReadFrom(raw); err != nil {
		t.Fatalf("kmsg cannot read the batch: %v", err)
	}
	if int(b.Length) != len(raw)-12 {
		t.Errorf("batch length %d, want %d", b.Length, len(raw)-12)
	}
	if want := crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)); uint32(b.CRC) != want {
		t.Errorf("batch CRC %#x, want %#x", uint32(b.CRC), want)
	}
	var values [][]byte
	for rest := b.Records; len(rest) > 0; {
		n, used := binary.Varint(rest)
		if used <= 0 || int(n)+used > len(rest) {
			t.Fatalf("record %d: bad length", len(values))
		}
		var r kmsg.Record
		if err := r.ReadFrom(rest[:used+int(n)]); err != nil {
			t.Fatalf("record %d: %v", len(values), err)
		}
		if int(r.OffsetDelta) != len(values) || r.Key != nil || len(r.Headers) != 0 {
			t.Errorf("record %d: offset delta %d, key %v, %d headers", len(values), r.OffsetDelta, r.Key, len(r.Headers))
		}
		values = append(values, r.Value)
		rest = rest[used+int(n):]
	}
	if int(b.NumRecords) != len(values) || int(b.LastOffsetDelta) != len(values)-1 {
		t.Errorf("batch says %d records, last offset delta %d; it holds %d", b.NumRecords, b.LastOffsetDelta, len(values))
	}
	return b, values
}

func TestAppendBatch(t *testing.T) {
	values := [][]byte{[]byte("a"), bytes.Repeat([]byte("b"), 300), {}, bytes.Repeat([]byte("c"), 70_000)}
	raw := appendBatch([]byte("prefix"), 42, 1234, values)
	if string(raw[:6]) != "prefix" {
		t.Fatal("appendBatch overwrote dst")
	}
	b, got := decodeBatch(t, raw[6:])
	if b.FirstOffset != 42 || b.Magic != 2 || b.Attributes != 0 || b.FirstTimestamp != 1234 || b.MaxTimestamp != 1234 || b.ProducerID != -1 || b.FirstSequence != -1 {
		t.Errorf("batch header %+v", b)
	}
	if len(got) != len(values) {
		t.Fatalf("%d records, want %d", len(got), len(values))
	}
	for i := range values {
		if !bytes.Equal(got[i], values[i]) {
			t.Errorf("record %d: value of %d bytes, want %d", i, len(got[i]), len(values[i]))
		}
	}
	// recordSize is what appendRecord appends, across the varints' sizes.
	for _, tc := range []struct{ delta, size int }{{0, 0}, {63, 63}, {64, 64}, {8191, 8192}, {0, 1 << 20}, {100_000, 1 << 25}} {
		if got, want := recordSize(tc.delta, tc.size), len(appendRecord(nil, tc.delta, make([]byte, tc.size))); got != want {
			t.Errorf("recordSize(%d, %d) = %d, want %d", tc.delta, tc.size, got, want)
		}
	}
}

func TestBatchRecords(t *testing.T) {
	for _, tc := range []struct{ size, max, want int }{
		{1024, kgoBatchMaxBytes, 0}, // 0: as many as fit, as checked below
		{1 << 20, kgoBatchMaxBytes, 1},
		{1 << 20, int(producerBatchMax(1 << 20)), 1},
		{100, 61 + recordSize(0, 100) + recordSize(1, 100), 2},
	} {
		n := batchRecords(tc.size, tc.max)
		if tc.want > 0 && n != tc.want {
			t.Errorf("batchRecords(%d, %d) = %d, want %d", tc.size, tc.max, n, tc.want)
		}
		values := make([][]byte, n)
		for i := range values {
			values[i] = make([]byte, tc.size)
		}
		raw := appendBatch(nil, 0, 0, values)
		if n > 1 && len(raw) > tc.max {
			t.Errorf("%d records of %d bytes make a batch of %d bytes, above %d", n, tc.size, len(raw), tc.max)
		}
		if more := appendBatch(nil, 0, 0, append(values, make([]byte, tc.size))); len(more) <= tc.max {
			t.Errorf("batchRecords(%d, %d) = %d, but %d fit in %d bytes", tc.size, tc.max, n, n+1, len(more))
		}
	}
}

func TestLargeSizing(t *testing.T) {
	if got := largeRecords(200, 1024); got != 195_313 {
		t.Errorf("largeRecords(200 MB, 1 KiB) = %d, want 195313", got)
	}
	if got := largeRecords(200, 1<<20); got != 191 {
		t.Errorf("largeRecords(200 MB, 1 MiB) = %d, want 191", got)
	}
	if got := producerBatchMax(1024); got != kgoBatchMaxBytes {
		t.Errorf("producerBatchMax(1 KiB) = %d, want kgo's default", got)
	}
	// A batch of one 1 MiB record is above Kafka's message.max.bytes: the
	// producer's limit and the servers' must hold it.
	one := len(appendBatch(nil, 0, 0, [][]byte{make([]byte, 1<<20)}))
	if one <= 1048588 || int(producerBatchMax(1<<20)) < one || messageMaxBytes(1<<20) < int(producerBatchMax(1<<20)) {
		t.Errorf("a 1 MiB record's batch is %d bytes; producer limit %d, message.max.bytes %d", one, producerBatchMax(1<<20), messageMaxBytes(1<<20))
	}
	if got := messageMaxBytes(1024); got != 1048588 {
		t.Errorf("messageMaxBytes(1 KiB) = %d, want Kafka's default", got)
	}
	for size, want := range map[int]string{1024: "1 KiB", 1 << 20: "1 MiB", 32 << 20: "32 MiB", 100: "100 B", 1536: "1536 B"} {
		if got := sizeName(size); got != want {
			t.Errorf("sizeName(%d) = %q, want %q", size, got, want)
		}
	}
}

func TestCeilingLog(t *testing.T) {
	const n, size = 2500, 1024
	mem, err := buildCeilingLog(n, size, true)
	if err != nil {
		t.Fatal(err)
	}
	file, err := buildCeilingLog(n, size, false)
	if err != nil {
		t.Fatal(err)
	}
	defer file.file.Close()
	if mem.highWatermark() != n || file.highWatermark() != n {
		t.Fatalf("high watermarks %d and %d, want %d", mem.highWatermark(), file.highWatermark(), n)
	}
	per := batchRecords(size, kgoBatchMaxBytes)
	if len(mem.batches) != (n+per-1)/per {
		t.Errorf("%d batches of up to %d records for %d records", len(mem.batches), per, n)
	}
	// Every batch decodes, at its base offset, with values of size bytes.
	var want int64
	for _, raw := range mem.batches {
		b, values := decodeBatch(t, raw)
		if b.FirstOffset != want {
			t.Errorf("batch at %d, want %d", b.FirstOffset, want)
		}
		for _, v := range values {
			if len(v) != size {
				t.Fatalf("a value of %d bytes", len(v))
			}
		}
		want += int64(len(values))
	}
	for _, tc := range []struct {
		offset    int64
		maxBytes  int
		wantFirst int // batch index
		wantCount int
	}{
		{0, 1 << 20, 0, 1},              // a batch fills 1 MiB
		{int64(per) - 1, 1 << 20, 0, 1}, // the batch holding the offset
		{int64(per), 1 << 20, 1, 1},
		{0, 10, 0, 1}, // at least one batch
		{0, 2 << 20, 0, 2},
		{0, 3 << 20, 0, 3}, // the third batch is a short one: 2500 = 2×per + rest
		{n, 1 << 20, 3, 0}, // at the end: nothing
	} {
		recs, got := mem.read(tc.offset, tc.maxBytes)
		if len(recs.Batches) != tc.wantCount {
			t.Errorf("read(%d, %d): %d batches, want %d", tc.offset, tc.maxBytes, len(recs.Batches), tc.wantCount)
			continue
		}
		wantSize := 0
		for i := range tc.wantCount {
			if !bytes.Equal(recs.Batches[i], mem.batches[tc.wantFirst+i]) {
				t.Errorf("read(%d, %d): batch %d is not batch %d", tc.offset, tc.maxBytes, i, tc.wantFirst+i)
			}
			wantSize += len(mem.batches[tc.wantFirst+i])
		}
		if got != wantSize || int(recs.Len()) != wantSize {
			t.Errorf("read(%d, %d): size %d (Len %d), want %d", tc.offset, tc.maxBytes, got, recs.Len(), wantSize)
		}
		// The file holds the same bytes at the section it names.
		frecs, fgot := file.read(tc.offset, tc.maxBytes)
		if fgot != got || frecs.Length != int64(got) || frecs.Batches != nil {
			t.Errorf("file read(%d, %d): %+v, size %d; want a section of %d bytes", tc.offset, tc.maxBytes, frecs, fgot, got)
			continue
		}
		section, err := io.ReadAll(io.NewSectionReader(frecs.File, frecs.Offset, frecs.Length))
		if err != nil {
			t.Fatal(err)
		}
		// The file's log has values of its own, batched alike: the section
		// holds the same batches, at the same offsets and of the same sizes.
		for i, b := range recs.Batches {
			n := int(binary.BigEndian.Uint32(section[8:])) + 12
			if n != len(b) || !bytes.Equal(section[:8], b[:8]) {
				t.Errorf("file read(%d, %d): batch %d of %d bytes at %x, want %d bytes at %x", tc.offset, tc.maxBytes, i, n, section[:8], len(b), b[:8])
				break
			}
			decodeBatch(t, section[:n])
			section = section[n:]
		}
	}
}

func TestCeilingFetch(t *testing.T) {
	log, err := buildCeilingLog(10, 100, true)
	if err != nil {
		t.Fatal(err)
	}
	h := &ceilingHandler{log: log}
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxBytes = 16, 50<<20
	own := kmsg.NewFetchRequestTopic()
	own.TopicID = largeTopicID
	for _, off := range []int64{0, 10, 11} {
		p := kmsg.NewFetchRequestTopicPartition()
		p.FetchOffset, p.PartitionMaxBytes = off, 1<<20
		own.Partitions = append(own.Partitions, p)
	}
	other := kmsg.NewFetchRequestTopic()
	other.TopicID = [16]byte{1}
	other.Partitions = []kmsg.FetchRequestTopicPartition{kmsg.NewFetchRequestTopicPartition()}
	req.Topics = []kmsg.FetchRequestTopic{own, other}
	resp, size := h.fetch(req)
	if size != len(log.batches[0]) {
		t.Errorf("fetched %d bytes, want the one batch's %d", size, len(log.batches[0]))
	}
	parts := resp.Topics[0].Partitions
	if parts[0].ErrorCode != 0 || parts[0].HighWatermark != 10 || len(resp.Records[0][0].Batches) != 1 {
		t.Errorf("offset 0: %+v, records %+v", parts[0], resp.Records[0][0])
	}
	if parts[1].ErrorCode != 0 || resp.Records[0][1].Batches != nil {
		t.Errorf("offset 10 (the end): %+v, records %+v; want no error and no records", parts[1], resp.Records[0][1])
	}
	if parts[2].ErrorCode != 1 { // OFFSET_OUT_OF_RANGE
		t.Errorf("offset 11: error %d, want OFFSET_OUT_OF_RANGE", parts[2].ErrorCode)
	}
	if code := resp.Topics[1].Partitions[0].ErrorCode; code != 3 { // UNKNOWN_TOPIC_OR_PARTITION
		t.Errorf("another topic: error %d, want UNKNOWN_TOPIC_OR_PARTITION", code)
	}
}

func TestLargeProduceFrame(t *testing.T) {
	for _, size := range []int{1 << 20, 3<<20 + 12345, 32 << 20} {
		frame, err := largeProduceFrame(size)
		if err != nil {
			t.Fatal(err)
		}
		if len(frame) != size || int(binary.BigEndian.Uint32(frame)) != size-4 {
			t.Errorf("a frame of %d bytes (size field %d), want %d", len(frame), binary.BigEndian.Uint32(frame), size)
		}
		// Size, key, version, correlation id, client id, then the body.
		if key, version := int16(binary.BigEndian.Uint16(frame[4:])), int16(binary.BigEndian.Uint16(frame[6:])); key != 0 || version != produceFrameVersion {
			t.Fatalf("key %d version %d, want Produce v%d", key, version, produceFrameVersion)
		}
		req := kmsg.NewPtrProduceRequest()
		req.Version = produceFrameVersion
		if err := req.ReadFrom(frame[4+8+2+len(clientID):]); err != nil {
			t.Fatalf("kmsg cannot read the Produce request: %v", err)
		}
		if req.Acks != 1 || len(req.Topics) != 1 || req.Topics[0].Topic != benchTopic || len(req.Topics[0].Partitions) != 1 {
			t.Fatalf("request %+v", req)
		}
		_, values := decodeBatch(t, req.Topics[0].Partitions[0].Records)
		for i, v := range values {
			if len(v) > budgetValueSize || len(v) == 0 || i < len(values)-1 && len(v) != budgetValueSize {
				t.Errorf("record %d of %d: %d bytes", i, len(values), len(v))
			}
		}
	}
}

// TestLargeEndToEnd runs scenario g with 2 MB of 1 KiB and 1 MiB records
// against the example broker, kfake, the two ceilings and the two floors.
func TestLargeEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds examples/broker")
	}
	rows := runScenarios(t, options{scenarios: []string{"g"}, rounds: 1, largeMB: 2, largeSizes: []int{1024, 1 << 20}})
	for _, size := range []string{"1 KiB", "1 MiB"} {
		for _, server := range []string{kafkanetServer, kfakeServer} {
			if mbps := find(t, rows, size+", produce", "MB/s", server).Median; mbps <= 0 {
				t.Errorf("%s, %s produce: %v MB/s", size, server, mbps)
			}
		}
		for _, server := range []string{kafkanetServer, kfakeServer, ceilingWritevServer, ceilingSendfileServer, fetchFloorServer, floorServer} {
			mbps := find(t, rows, size+", consume", "MB/s", server).Median
			cpu := find(t, rows, size+", consume", "server CPU ms/MB", server).Median
			if mbps <= 0 || cpu <= 0 {
				t.Errorf("%s, %s consume: %v MB/s, %v ms/MB", size, server, mbps, cpu)
			}
		}
		// The ceilings do not produce.
		for _, r := range rows {
			if r.Case == size+", produce" && (r.Server == ceilingWritevServer || r.Server == ceilingSendfileServer || r.Server == fetchFloorServer || r.Server == floorServer) {
				t.Errorf("a produce row for %s", r.Server)
			}
		}
	}
	// The same records were consumed from each server: 2 MB of 1 KiB
	// records, and the warm-up one.
	want := float64(largeRecords(2, 1024) + 1)
	for _, server := range []string{kafkanetServer, kfakeServer, ceilingWritevServer, ceilingSendfileServer, fetchFloorServer, floorServer} {
		r := find(t, rows, "1 KiB, consume", "records/s", server)
		mb := find(t, rows, "1 KiB, consume", "MB/s", server)
		if got := r.Median / mb.Median * want * 1024 / 1e6; got < want*0.999 || got > want*1.001 {
			t.Errorf("%s: %v records consumed, want %v", server, got, want)
		}
	}
}

// TestFloorChunks checks that the floor writes every batch, in order, in
// chunks of at most floorChunk bytes, or one batch when it alone is more.
func TestFloorChunks(t *testing.T) {
	var batches [][]byte
	for i, n := range []int{floorChunk / 2, floorChunk / 2, 1, floorChunk + 5, 7, floorChunk / 3} {
		batches = append(batches, bytes.Repeat([]byte{byte(i)}, n))
	}
	var sizes []int
	var got [][]byte
	for _, chunk := range floorChunks(batches) {
		n := 0
		for _, b := range chunk {
			n += len(b)
			got = append(got, b)
		}
		sizes = append(sizes, n)
	}
	if !slices.EqualFunc(got, batches, bytes.Equal) {
		t.Fatalf("the chunks hold %d batches, not the %d given in order", len(got), len(batches))
	}
	// The two halves make exactly floorChunk; the byte after them starts a
	// chunk the large batch would overflow; the large batch is alone.
	if want := []int{floorChunk, 1, floorChunk + 5, 7 + floorChunk/3}; !slices.Equal(sizes, want) {
		t.Errorf("chunks of %v bytes, want %v", sizes, want)
	}
}

// TestBudgetEndToEnd runs scenario h with 4 connections sending 4 MiB
// each: kafkanet with a budget of 8 MiB, with it and GOMEMLIMIT, and
// without, kfake, and examples/broker with the budget and its own memory
// limit. The bench's own environment sets GOMEMLIMIT and GOGC, which no
// server may inherit.
func TestBudgetEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds examples/broker")
	}
	t.Setenv("GOMEMLIMIT", "1GiB")
	t.Setenv("GOGC", "150")
	o := options{scenarios: []string{"h"}, rounds: 1, budgetClients: 4, budgetRequest: 4 << 20, budget: 8 << 20}
	rows := runScenarios(t, o)
	b := &bench{opts: o}
	limited, memLimited, unlimited := b.budgetCases()
	if limited != "4 × 4 MiB, queued.max.request.bytes 8 MiB" || memLimited != limited+", GOMEMLIMIT 16 MiB" || unlimited != "4 × 4 MiB, no budget" {
		t.Errorf("cases %q, %q and %q", limited, memLimited, unlimited)
	}
	broker := b.budgetBrokerCase()
	if want := limited + ", examples/broker's own memory limit (no GOMEMLIMIT)"; broker != want {
		t.Errorf("examples/broker's case %q, want %q", broker, want)
	}
	// The memory limit reached the child of its case, and only that one.
	if got := find(t, rows, memLimited, "GOMEMLIMIT MiB", kafkanetServer).Median; got != 16 {
		t.Errorf("the child of %q runs with GOMEMLIMIT %v MiB", memLimited, got)
	}
	for _, r := range rows {
		if r.Metric == "GOMEMLIMIT MiB" && r.Case != memLimited {
			t.Errorf("a memory limit in %q", r.Case)
		}
	}
	// examples/broker set its own, twice its budget (its log empty then),
	// not the environment's.
	if got := find(t, rows, broker, "own memory limit MiB", brokerServer).Median; got != 16 {
		t.Errorf("examples/broker set a memory limit of %v MiB, want twice its budget, 16", got)
	}
	for _, tc := range []struct{ c, server string }{{limited, kafkanetServer}, {memLimited, kafkanetServer}, {unlimited, kafkanetServer}, {unlimited, kfakeServer},
		{broker, brokerServer}} {
		rise := find(t, rows, tc.c, peakRiseMetric, tc.server).Median
		all := find(t, rows, tc.c, "all answered ms", tc.server).Median
		if rise <= 0 || all <= 0 {
			t.Errorf("%s, %s: peak RSS rise %v MiB, all answered in %v ms", tc.c, tc.server, rise, all)
		}
		if got := find(t, rows, tc.c, answeredMetric, tc.server).Median; got != 100 {
			t.Errorf("%s, %s: %v%% answered", tc.c, tc.server, got)
		}
	}
	if d := find(t, rows, limited, "pool depleted ms", kafkanetServer).Median; d < 0 {
		t.Errorf("pool depleted %v ms", d)
	}
	for _, r := range rows {
		if r.Metric == "pool depleted ms" && (r.Case != limited && r.Case != memLimited || r.Server != kafkanetServer) {
			t.Errorf("a pool without a budget: %+v", r)
		}
		if r.Case == limited && r.Server == kfakeServer {
			t.Errorf("kfake measured with a budget: %+v", r)
		}
		if (r.Case == broker) != (r.Server == brokerServer) {
			t.Errorf("examples/broker's case and server apart: %+v", r)
		}
	}
}

// TestBudgetBrokerTargets checks scenario h's targets, examples/broker's
// alone, and what the bench reads of the broker's log.
func TestBudgetBrokerTargets(t *testing.T) {
	o, err := parseOptions([]string{"-scenarios", "h"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	b := &bench{opts: o}
	sc := b.scenario("h")
	if !slices.Equal(sc.servers, []serverKind{kafkanetServer, kfakeServer, brokerServer}) {
		t.Errorf("(h) servers %q", sc.servers)
	}
	want := []target{{Case: b.budgetBrokerCase(), Metric: peakRiseMetric, AtMost: true, Bound: 200}, {Case: b.budgetBrokerCase(), Metric: answeredMetric, Bound: 100}}
	if !slices.Equal(sc.info.Targets, want) {
		t.Errorf("(h) targets %+v, want %+v", sc.info.Targets, want)
	}
	if b.budgetBrokerCase() != "16 × 32 MiB, queued.max.request.bytes 64 MiB, examples/broker's own memory limit (no GOMEMLIMIT)" {
		t.Errorf("examples/broker's case: %q", b.budgetBrokerCase())
	}
	for _, tc := range []struct {
		log   string
		limit int64
		state limitState
	}{
		{"time=x level=INFO msg=started\n", 0, limitUnlogged},
		{"time=x level=INFO msg=\"memory limit\" bytes=134217728 from=\"twice queued.max.request.bytes\"\ntime=x level=INFO msg=started\n", 128 << 20, limitSet},
		{"time=x level=INFO msg=\"memory limit: the environment's\" GOMEMLIMIT=1GiB\n", 0, limitFromEnv},
		{"time=x level=INFO msg=\"memory limit: none\" reason=\"no queued.max.request.bytes\"\n", 0, limitNone},
	} {
		if limit, state := parseMemoryLimitLog(tc.log); limit != tc.limit || state != tc.state {
			t.Errorf("parseMemoryLimitLog(%q) = %d, %d; want %d, %d", tc.log, limit, state, tc.limit, tc.state)
		}
	}
	// A child's environment loses the variables named, whatever their
	// value, and gets those added.
	b.env = []string{"GOMEMLIMIT=1GiB", "GOGC=50", "GOMEMLIMITX=1", "PATH=/bin"}
	if got := b.childEnv(budgetUnsetEnv, "GOMEMLIMIT=2"); !slices.Equal(got, []string{"GOMEMLIMITX=1", "PATH=/bin", "GOMEMLIMIT=2"}) {
		t.Errorf("childEnv = %q", got)
	}
	if got := b.childEnv(nil); !slices.Equal(got, b.env) {
		t.Errorf("childEnv without changes = %q", got)
	}
}

// A ceiling's spec reaches the child whole, the memory it churns
// included, and churnMemory writes as many MiB as asked.
func TestCeilingSpecRoundTrip(t *testing.T) {
	want := childSpec{Kind: ceilingWritevServer, Addr: "127.0.0.1:1", BlockKey: -1, Records: 5, RecordSize: 100, ChurnMB: 3}
	got, err := parseChildSpec(want.args()[1:])
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("parseChildSpec(%q) = %+v, %v; want %+v", want.args()[1:], got, err, want)
	}
	churn := churnMemory(3)
	if len(churn) != 3 || len(churn[2]) != 1<<20 || churn[2][4096] != 1 {
		t.Errorf("churnMemory(3): %d MiB", len(churn))
	}
}
