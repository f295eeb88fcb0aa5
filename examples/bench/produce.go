package main

// Scenario (b): kgo producing records, kafkanet against kfake.

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *bench) produceInfo() scenarioInfo {
	info := scenarioInfo{ID: "b", Title: fmt.Sprintf("kgo producing %d records of %d bytes to a topic of %d partitions", b.opts.records, b.opts.recordSize, benchPartitions)}
	if b.opts.produceDiscard {
		info.Notes = append(info.Notes,
			"Both servers discard the records: kafkanet is the minimal socketserver host (fixed Metadata, Produce acknowledged",
			"and dropped), kfake runs with BlackholeProduce (offsets and idempotent sequences still checked, bytes dropped).")
	} else {
		info.Notes = append(info.Notes,
			"Both servers store the records in memory: kafkanet is examples/broker (built with go build), which keeps every batch,",
			"and kfake stores them as it does by default. -produce-discard compares the discarding modes instead.")
	}
	info.Notes = append(info.Notes,
		"kgo defaults (idempotent, acks=all, linger 10 ms, one produce request in flight per broker) but no compression;",
		"incompressible values. Timed from the first record to the last acknowledgement. MB = 10^6 bytes of values.",
		"The server's RSS is read after the last acknowledgement.")
	if !b.opts.produceDiscard {
		info.Notes = append(info.Notes, b.brokerPropsNote()...)
		info.Notes = append(info.Notes, b.baselineNote(kafkanetServer)...)
		if b.opts.baselineBroker != "" {
			info.Ratios = b.baselineRatios(defaultRatios, kafkanetServer)
		}
	}
	return info
}

// runProduce measures one server.
func (b *bench) runProduce(ctx context.Context, server serverKind) ([]sample, error) {
	var c *child
	var err error
	if server == baselineServer || server == kafkanetServer && !b.opts.produceDiscard {
		c, err = b.startBrokerAs(ctx, server)
	} else {
		c, err = b.startServer(ctx, childSpec{Kind: server, BlockKey: -1, Discard: b.opts.produceDiscard})
	}
	if err != nil {
		return nil, err
	}
	defer c.stop()
	out, err := produce(ctx, c, produceLoad{topic: benchTopic, partitions: benchPartitions, records: b.opts.records, size: b.opts.recordSize})
	out = renameCase(out, "produce")
	if err != nil {
		return out, err
	}
	return out, c.stop()
}

// produceLoad is what produce writes: records of size bytes to a topic of
// so many partitions, in batches of at most batchMax bytes (0: kgo's
// default).
type produceLoad struct {
	topic         string
	partitions    int32
	records, size int
	batchMax      int32
	// via, when not nil, is a hop in front of the server (scenario p): the
	// client bootstraps from it, and the window measures it, the server's
	// CPU time as its AlsoCPU.
	via *child
	// tls is the client's TLS configuration when it reaches the server
	// with TLS (scenario p's TLS hops); nil: plaintext.
	tls *tls.Config
}

// produce creates the load's topic on c, writes one record, then the
// load's records with kgo, and measures the latter.
func produce(ctx context.Context, c *child, load produceLoad) ([]sample, error) {
	opts := append(seedOpts(c, load.via, load.tls), kgo.DefaultProduceTopic(load.topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if load.batchMax > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(load.batchMax))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kgo client: %w", err)
	}
	defer cl.Close()
	if err := createTopic(ctx, cl, load.topic, load.partitions); err != nil {
		return nil, err
	}
	values, err := randomValues(max(1, min(4096, (16<<20)/load.size)), load.size)
	if err != nil {
		return nil, err
	}
	// One record first, so that the producer id and metadata are known
	// before the clock starts.
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: values[0]}).FirstErr(); err != nil {
		return nil, fmt.Errorf("first record: %w", err)
	}
	w, err := measure(c, load.via)
	if err != nil {
		return nil, err
	}
	var failed atomic.Int64
	var firstErr atomic.Pointer[error]
	for i := range load.records {
		cl.Produce(ctx, &kgo.Record{Value: values[i%len(values)]}, func(_ *kgo.Record, err error) {
			if err != nil && failed.Add(1) == 1 {
				firstErr.Store(&err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return nil, err
	}
	if err := w.end(); err != nil {
		return nil, err
	}
	if f := failed.Load(); f > 0 {
		return nil, fmt.Errorf("%d of %d records failed, the first with: %w", f, load.records, *firstErr.Load())
	}
	rss, err := w.c.rss()
	if err != nil {
		return nil, err
	}
	return throughputSamples(w, load.records, int64(load.records)*int64(load.size), rss), nil
}

// seedOpts are a kgo client's options to reach c, or via in front of it
// if not nil: its address as the seed broker, dialed with TLS so
// configured if tlsConfig is not nil.
func seedOpts(c, via *child, tlsConfig *tls.Config) []kgo.Opt {
	seed := c.addr
	if via != nil {
		seed = via.addr
	}
	opts := []kgo.Opt{kgo.SeedBrokers(seed)}
	if tlsConfig != nil {
		opts = append(opts, kgo.DialTLSConfig(tlsConfig))
	}
	return opts
}

// measure starts the window of a load on server c, reached through via
// if not nil: via's, with c as its second process.
func measure(c, via *child) (*window, error) {
	if via == nil {
		return startWindow(c)
	}
	return startWindowAlso(via, c)
}

// createTopic creates a topic; one that exists already will do.
func createTopic(ctx context.Context, cl *kgo.Client, topic string, partitions int32) error {
	return createTopicWith(ctx, cl, topic, partitions, nil)
}

// createTopicWith creates a topic with the given topic configs; one that
// exists already will do.
func createTopicWith(ctx context.Context, cl *kgo.Client, topic string, partitions int32, configs map[string]string) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10_000
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = topic, partitions, 1
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		t.Configs = append(t.Configs, c)
	}
	req.Topics = []kmsg.CreateTopicsRequestTopic{t}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("creating topic %s: %w", topic, err)
	}
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil && err != kerr.TopicAlreadyExists {
			return fmt.Errorf("creating topic %s: %w", topic, err)
		}
	}
	return nil
}

// randomValues returns n random values of size bytes.
func randomValues(n, size int) ([][]byte, error) {
	buf := make([]byte, n*size)
	if _, err := rand.Read(buf); err != nil {
		return nil, err
	}
	out := make([][]byte, n)
	for i := range out {
		out[i] = buf[i*size : (i+1)*size : (i+1)*size]
	}
	return out, nil
}
