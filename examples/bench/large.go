package main

// Scenario (g): kgo producing and consuming large volumes, kafkanet's
// example broker against kfake, and consuming from the ceilings.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// kgoBatchMaxBytes is kgo's default ProducerBatchMaxBytes.
const kgoBatchMaxBytes = 1_000_012

// producerBatchMax is the batch limit scenario g gives kgo for records of
// size bytes: kgo's default, or as much as one record needs when that is
// more (kgo refuses a record larger than its batch limit).
func producerBatchMax(size int) int32 {
	return int32(max(kgoBatchMaxBytes, batchHeaderSize+recordSize(0, size)+512))
}

// messageMaxBytes is the servers' message.max.bytes in scenario g: Kafka's
// default (1048588), or more when the producer's batches may be larger.
func messageMaxBytes(size int) int {
	return max(1048588, int(producerBatchMax(size)))
}

// largeRecords is how many records of size bytes make at least mb
// megabytes (10^6 bytes) of values.
func largeRecords(mb, size int) int {
	return int((int64(mb)*1_000_000 + int64(size) - 1) / int64(size))
}

// sizeName names a record size: "1 KiB", "1 MiB", or bytes.
func sizeName(size int) string {
	switch {
	case size%(1<<20) == 0:
		return strconv.Itoa(size>>20) + " MiB"
	case size%(1<<10) == 0:
		return strconv.Itoa(size>>10) + " KiB"
	}
	return strconv.Itoa(size) + " B"
}

func (b *bench) largeInfo() scenarioInfo {
	info := scenarioInfo{ID: "g", Title: fmt.Sprintf("kgo producing, then consuming, %d MB of records of each size %v, to and from one partition, no compression",
		b.opts.largeMB, sizeNames(b.opts.largeSizes)),
		Notes: []string{
			"kafkanet is examples/broker (built with go build), which keeps produced batches as slices of the request frames and answers",
			"Fetch inline with them by reference (socketserver.FetchResponse, written with writev), with the operating system's socket",
			"buffers (its default, as kfake's and the ceilings'); it runs with log.retention.bytes=-1, so that",
			"the consume phase finds every record, and message.max.bytes raised to the producer's batch limit where that is above Kafka's",
			"1048588 (1 MiB records); kfake gets the same message.max.bytes. A fresh server for each record size and round.",
			"Produce: kgo defaults (idempotent, acks=all, linger 10 ms, batches up to 1,000,012 bytes, or one record and 512 bytes when a",
			"record needs more), incompressible values, timed from the first record after a warm-up one to the last acknowledgement.",
			"Consume: a new kgo client reads the partition from offset 0 (ConsumePartitions, kgo's fetch defaults: 1 MiB per partition,",
			"at least one batch) until it has every record in the log, the warm-up one included, timed from the client's creation.",
			"ceiling-writev and ceiling-sendfile: a socketserver host, consume only, that builds the same number of records at start,",
			"batched as kgo batches them, in a file, and answers each Fetch inline (socketserver.Inline) with its batches by reference:",
			"from memory with writev (Records.Batches; the log is read from the file into memory, so the kernel filled that memory,",
			"as a broker's is filled from its sockets), or from the file in the page cache with sendfile (Records.File).",
			"floor-write: no Kafka protocol at all; the same log, in memory the kernel filled, written to one connection with writev in",
			"chunks of 1 MiB (at least a batch), as many writes as Fetch answers, and read by the bench to the end: the least any server",
			"pays on this machine to send these bytes. A server's CPU per MB cannot go below the floor's.",
			"floor-fetch: the least a server of the Kafka protocol pays to serve kgo the same log: a goroutine per connection and no library,",
			"each request read through a 4 KiB buffered reader, decoded with kmsg and answered at once as the ceilings answer it, Fetch with",
			"the batches by reference in one writev. What it costs above floor-write is what answering kgo's requests costs any server.",
			"MB = 10^6 bytes of record values. Server CPU ms/MB: the server's CPU time in the phase over its MB; reads/MB and writes/MB its read and write system calls (syscr, syscw of /proc/PID/io). RSS after each phase.",
		},
		Ratios: b.baselineRatios([]ratioPair{{kafkanetServer, kfakeServer}, {kafkanetServer, ceilingWritevServer}, {kafkanetServer, fetchFloorServer}, {kafkanetServer, floorServer}, {fetchFloorServer, floorServer}, {kfakeServer, floorServer}},
			kafkanetServer)}
	if b.opts.logChurnMB > 0 {
		info.Notes = append(info.Notes, fmt.Sprintf("The ceilings and floors wrote %d MiB of other memory, and kept it, after building their logs (-log-churn-mb).", b.opts.logChurnMB))
	}
	info.Notes = append(info.Notes, b.brokerPropsNote()...)
	info.Notes = append(info.Notes, b.baselineNote(kafkanetServer)...)
	return info
}

// brokerPropsNote says which -broker-set properties examples/broker ran
// with, if any.
func (b *bench) brokerPropsNote() []string {
	if len(b.opts.brokerProps) == 0 {
		return nil
	}
	return []string{"examples/broker ran with -broker-set " + strings.Join(b.opts.brokerProps, " -broker-set ") + "."}
}

func sizeNames(sizes []int) []string {
	var out []string
	for _, s := range sizes {
		out = append(out, sizeName(s))
	}
	return out
}

// runLarge measures one server at each record size of -large-sizes.
func (b *bench) runLarge(ctx context.Context, server serverKind) ([]sample, error) {
	var out []sample
	for _, size := range b.opts.largeSizes {
		s, err := b.largeCase(ctx, server, size)
		out = append(out, s...)
		if err != nil {
			return out, fmt.Errorf("%s records: %w", sizeName(size), err)
		}
	}
	return out, nil
}

// largeCase runs one server for one record size: produce then consume, or
// consume alone from a ceiling.
func (b *bench) largeCase(ctx context.Context, server serverKind, size int) ([]sample, error) {
	n := largeRecords(b.opts.largeMB, size)
	var c *child
	var err error
	switch server {
	case kafkanetServer, baselineServer:
		c, err = b.startBrokerAs(ctx, server, "log.retention.bytes=-1", "message.max.bytes="+strconv.Itoa(messageMaxBytes(size)))
	case kfakeServer:
		c, err = b.startServer(ctx, childSpec{Kind: server, BlockKey: -1, MessageMaxBytes: messageMaxBytes(size)})
	default: // a ceiling: the warm-up record too
		c, err = b.startServer(ctx, childSpec{Kind: server, BlockKey: -1, Records: n + 1, RecordSize: size, ChurnMB: b.opts.logChurnMB})
	}
	if err != nil {
		return nil, err
	}
	defer c.stop()
	var out []sample
	if server == floorServer {
		s, err := consumeFloor(ctx, b.dialer, c, n+1, size)
		out = append(out, renameCase(s, sizeName(size)+", consume")...)
		if err != nil {
			return out, fmt.Errorf("consume: %w", err)
		}
		return out, c.stop()
	}
	if server == kafkanetServer || server == baselineServer || server == kfakeServer {
		p, err := produce(ctx, c, produceLoad{topic: largeTopic, partitions: 1, records: n, size: size, batchMax: producerBatchMax(size)})
		out = append(out, renameCase(p, sizeName(size)+", produce")...)
		if err != nil {
			return out, fmt.Errorf("produce: %w", err)
		}
	}
	s, err := consume(ctx, c, n+1, size)
	out = append(out, renameCase(s, sizeName(size)+", consume")...)
	if err != nil {
		return out, fmt.Errorf("consume: %w", err)
	}
	return out, c.stop()
}

// renameCase sets the case of every sample.
func renameCase(s []sample, c string) []sample {
	for i := range s {
		s[i].Case = c
	}
	return s
}

// consume reads partition 0 of largeTopic from offset 0 with a new kgo
// client until it has n records, checking that each has the next offset
// and a value of size bytes, and measures it.
func consume(ctx context.Context, c *child, n, size int) ([]sample, error) {
	return consumeTopic(ctx, c, nil, nil, largeTopic, n, size)
}

// consumeTopic is consume for partition 0 of topic, through via if not
// nil (scenario p): the client bootstraps from via, and the window
// measures via, with c's CPU time as its AlsoCPU. With tlsConfig not nil
// the client dials with TLS so configured (scenario p's TLS hops).
func consumeTopic(ctx context.Context, c, via *child, tlsConfig *tls.Config, topic string, n, size int) ([]sample, error) {
	w, err := measure(c, via)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(seedOpts(c, via, tlsConfig),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}))...)
	if err != nil {
		return nil, fmt.Errorf("kgo client: %w", err)
	}
	defer cl.Close()
	var got, bytes int64
	for got < int64(n) {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var errs []error
		fetches.EachError(func(t string, p int32, err error) {
			errs = append(errs, fmt.Errorf("%s[%d]: %w", t, p, err))
		})
		if err := errors.Join(errs...); err != nil {
			return nil, fmt.Errorf("after %d of %d records: %w", got, n, err)
		}
		for it := fetches.RecordIter(); !it.Done(); {
			r := it.Next()
			if r.Offset != got || len(r.Value) != size {
				return nil, fmt.Errorf("record %d: offset %d with %d bytes, want offset %d with %d", got, r.Offset, len(r.Value), got, size)
			}
			got++
			bytes += int64(len(r.Value))
		}
	}
	if err := w.end(); err != nil {
		return nil, err
	}
	rss, err := w.c.rss()
	if err != nil {
		return nil, err
	}
	return throughputSamples(w, n, bytes, rss), nil
}

// consumeFloor reads the floor's log of n records of size bytes to its end
// and measures it.
func consumeFloor(ctx context.Context, d *dialer, c *child, n, size int) ([]sample, error) {
	w, err := startWindow(c)
	if err != nil {
		return nil, err
	}
	got, err := readFloor(ctx, d, c.addr)
	if err != nil {
		return nil, err
	}
	if want := int64(n) * int64(size); got < want {
		return nil, fmt.Errorf("the floor sent %d bytes, fewer than the %d of its records' values", got, want)
	}
	if err := w.end(); err != nil {
		return nil, err
	}
	rss, err := c.rss()
	if err != nil {
		return nil, err
	}
	return throughputSamples(w, n, int64(n)*int64(size), rss), nil
}

// throughputSamples are the metrics of moving records of the given total
// bytes in w.
func throughputSamples(w *window, records int, bytes int64, rss int64) []sample {
	mb := float64(bytes) / 1e6
	secs := w.Elapsed.Seconds()
	out := []sample{
		{Metric: "records/s", Value: float64(records) / secs},
		{Metric: "MB/s", Value: mb / secs},
		{Metric: "server CPU ms/MB", Value: micros(w.ServerCPU) / 1000 / mb},
		{Metric: "server ctx switches/MB", Value: float64(w.ServerSwitches) / mb},
		{Metric: "bench CPU ms/MB", Value: micros(w.Client) / 1000 / mb},
		{Metric: "server RSS MiB after", Value: mib(rss)},
	}
	if w.ServerReads >= 0 { // system calls: counts the machine's load does not move
		out = append(out[:4:4], append([]sample{
			{Metric: "server reads/MB", Value: float64(w.ServerReads) / mb},
			{Metric: "server writes/MB", Value: float64(w.ServerWrites) / mb},
		}, out[4:]...)...)
	}
	if w.also != nil { // scenario p: the server is a hop, also the broker behind it
		out = append(out, sample{Metric: "broker CPU ms/MB", Value: micros(w.AlsoCPU) / 1000 / mb})
	}
	return out
}
