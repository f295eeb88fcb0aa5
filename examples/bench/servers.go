package main

// This file is the child side: the bench binary re-executed with childFlag
// becomes one of the servers measured, alone in its process (or, with
// attackFlag after childFlag, scenario i's attackers: attackers.go).

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
)

// childFlag, as the first argument, makes the binary a server child (or
// the attacker child, when attackFlag follows it).
const childFlag = "-bench-child"

// serverKind names a server under test.
type serverKind = string

// The servers under test.
const (
	kafkanetServer serverKind = "kafkanet"
	// kafkanetInlineServer is the minimal kafkanet host with its APIs
	// answered inline, on each connection's goroutine (socketserver.Inline).
	kafkanetInlineServer serverKind = "kafkanet-inline"
	kfakeServer          serverKind = "kfake"
	echoServer           serverKind = "echo"
	// echoControlServer is a second echo server, measured in the same
	// rounds as the first (scenario a, -echo-control): its ratios to echo
	// are what the machine's noise alone makes of two identical servers.
	echoControlServer serverKind = "echo-control"
	// The ceilings of consuming (scenario g): a socketserver host that
	// answers each Fetch with batches built at start, by reference, from
	// memory (writev) or from a file (sendfile).
	ceilingWritevServer   serverKind = "ceiling-writev"
	ceilingSendfileServer serverKind = "ceiling-sendfile"
	// floorServer is the floor of consuming (scenario g): the same log
	// written to a socket with no protocol at all.
	floorServer serverKind = "floor-write"
	// fetchFloorServer is the protocol floor of consuming (scenario g):
	// the same log sent in answer to kgo's Fetch requests by a goroutine
	// per connection with no library.
	fetchFloorServer serverKind = "floor-fetch"
)

// Environment variables that carry the TLS key and certificate chain (PEM)
// from the bench to its server children.
const (
	envTLSKey   = "KAFKANET_BENCH_TLS_KEY"
	envTLSChain = "KAFKANET_BENCH_TLS_CHAIN"
)

// The names of the minimal kafkanet server's listeners.
const (
	clientListener  = "CLIENT"
	controlListener = "CONTROLLER"
)

// benchTopic is the topic the produce scenario writes, with
// benchPartitions partitions.
const (
	benchTopic      = "bench"
	benchPartitions = 3
)

// childSpec says which server a child runs and how. It travels as the
// child's flags.
type childSpec struct {
	Kind        serverKind
	Addr        string // 127.0.0.1:port of the data-plane (client) listener
	ControlAddr string // kafkanet: the control listener's address
	TLS         bool   // the client listener speaks TLS (key and chain from the environment)
	// SharedControl makes kafkanet's control listener a data-plane
	// listener (no control.plane.listener.name).
	SharedControl bool
	// BlockKey, when >= 0, makes kafkanet's data-plane handler hold every
	// request of that API key from the client listener unanswered, so that
	// the handlers block and the request queue fills.
	BlockKey int
	// Discard makes kfake blackhole produced records (kafkanet's minimal
	// server always discards them).
	Discard bool
	// Props are broker properties ("key=value") laid over the minimal
	// kafkanet server's, such as queued.max.request.bytes.
	Props []string
	// MessageMaxBytes, when positive, is kfake's message.max.bytes.
	MessageMaxBytes int
	// Records and RecordSize are the log a ceiling builds at start: that
	// many records of that many bytes in partition 0 of largeTopic.
	Records, RecordSize int
	// ChurnMB, when positive, has a ceiling or floor write that many MiB
	// of other memory after it builds its log, and keep it, before it
	// serves (see -log-churn-mb).
	ChurnMB int
	// Env is added to the child's environment (it is not a flag), such as
	// GOMEMLIMIT, after UnsetEnv's variables are removed from it.
	Env      []string
	UnsetEnv []string
}

// args returns the child's command-line arguments.
func (s childSpec) args() []string {
	args := []string{childFlag, "-kind", s.Kind, "-addr", s.Addr, "-control-addr", s.ControlAddr,
		"-tls=" + strconv.FormatBool(s.TLS), "-shared-control=" + strconv.FormatBool(s.SharedControl),
		"-block-key", strconv.Itoa(s.BlockKey), "-discard=" + strconv.FormatBool(s.Discard),
		"-message-max-bytes", strconv.Itoa(s.MessageMaxBytes),
		"-records", strconv.Itoa(s.Records), "-record-size", strconv.Itoa(s.RecordSize), "-churn-mb", strconv.Itoa(s.ChurnMB)}
	for _, p := range s.Props {
		args = append(args, "-prop", p)
	}
	return args
}

// parseChildSpec reads a child's arguments (those after childFlag).
func parseChildSpec(args []string) (childSpec, error) {
	fs := flag.NewFlagSet("bench-child", flag.ContinueOnError)
	var s childSpec
	fs.StringVar(&s.Kind, "kind", "", "server kind")
	fs.StringVar(&s.Addr, "addr", "", "client listener address")
	fs.StringVar(&s.ControlAddr, "control-addr", "", "control listener address")
	fs.BoolVar(&s.TLS, "tls", false, "TLS on the client listener")
	fs.BoolVar(&s.SharedControl, "shared-control", false, "no separate control plane")
	fs.IntVar(&s.BlockKey, "block-key", -1, "API key whose data-plane requests are never answered")
	fs.BoolVar(&s.Discard, "discard", false, "kfake: blackhole produced records")
	fs.IntVar(&s.MessageMaxBytes, "message-max-bytes", 0, "kfake: message.max.bytes")
	fs.IntVar(&s.Records, "records", 0, "ceiling: records in the log")
	fs.IntVar(&s.RecordSize, "record-size", 0, "ceiling: bytes in each record's value")
	fs.IntVar(&s.ChurnMB, "churn-mb", 0, "ceiling or floor: MiB of other memory written after the log is built")
	fs.Func("prop", "kafkanet: a broker property key=value (repeatable)", func(p string) error {
		if !strings.Contains(p, "=") {
			return fmt.Errorf("%q is not key=value", p)
		}
		s.Props = append(s.Props, p)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return childSpec{}, err
	}
	if s.Addr == "" {
		return childSpec{}, errors.New("-addr is required")
	}
	return s, nil
}

// childMain runs a server child until SIGTERM or SIGINT and returns its
// exit status. The kafkanet child answers "stats" lines on stdin with a
// JSON line of [childStats] on stdout. With attackFlag first, args make
// scenario i's attacker child instead (attackMain).
func childMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == attackFlag {
		return attackMain(args[1:], stdin, stdout, stderr)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	spec, err := parseChildSpec(args)
	if err == nil {
		switch spec.Kind {
		case kafkanetServer, kafkanetInlineServer:
			err = serveKafkanet(ctx, spec, stdin, stdout)
		case ceilingWritevServer, ceilingSendfileServer:
			err = serveCeiling(ctx, spec)
		case floorServer:
			err = serveFloor(ctx, spec)
		case fetchFloorServer:
			err = serveFetchFloor(ctx, spec)
		case kfakeServer:
			err = serveKfake(ctx, spec)
		case echoServer:
			err = serveEcho(ctx, spec)
		case bareServer:
			err = serveBare(ctx, spec)
		default:
			err = fmt.Errorf("unknown server kind %q", spec.Kind)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench child: %v\n", err)
		return 1
	}
	return 0
}

// childTLS returns the server TLS configuration from the key and chain in
// the environment.
func childTLS() (*tls.Config, error) {
	cert, err := tls.X509KeyPair([]byte(os.Getenv(envTLSChain)), []byte(os.Getenv(envTLSKey)))
	if err != nil {
		return nil, fmt.Errorf("TLS key pair from the environment: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}}, nil
}

// serveKfake runs a one-broker kfake cluster on spec.Addr's port.
func serveKfake(ctx context.Context, spec childSpec) error {
	_, port, err := net.SplitHostPort(spec.Addr)
	if err != nil {
		return err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return fmt.Errorf("port %q: %w", port, err)
	}
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.Ports(p)}
	if spec.TLS {
		cfg, err := childTLS()
		if err != nil {
			return err
		}
		opts = append(opts, kfake.TLS(cfg))
	}
	if spec.Discard {
		opts = append(opts, kfake.BlackholeProduce())
	}
	if spec.MessageMaxBytes > 0 {
		opts = append(opts, kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(spec.MessageMaxBytes)}))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("kfake: %w", err)
	}
	<-ctx.Done()
	c.Close()
	return nil
}

// echoResponseSize is the size of the echo server's response frame: size,
// correlation id, error code and an empty array of API keys, a valid
// ApiVersions v0 response.
const echoResponseSize = 4 + 4 + 2 + 4

// maxEchoFrame bounds the frames the echo server reads.
const maxEchoFrame = 100 << 20

// serveEcho runs the ceiling: 4-byte-length-prefixed frames, a goroutine
// per connection, each frame answered with a fixed ApiVersions v0 response
// carrying the request's correlation id.
func serveEcho(ctx context.Context, spec childSpec) error {
	ln, err := net.Listen("tcp", spec.Addr)
	if err != nil {
		return err
	}
	if spec.TLS {
		cfg, err := childTLS()
		if err != nil {
			ln.Close()
			return err
		}
		ln = tls.NewListener(ln, cfg)
	}
	return acceptEach(ctx, ln, echoConn)
}

// acceptEach serves each connection ln accepts with serve, on a goroutine
// of its own, until ctx ends (then it closes ln and returns nil) or Accept
// fails.
func acceptEach(ctx context.Context, ln net.Listener, serve func(net.Conn)) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accept: %w", err)
		}
		go serve(c)
	}
}

// echoConn answers the frames of one connection until it closes. It
// flushes only when no further request is buffered.
func echoConn(c net.Conn) {
	defer c.Close()
	br, bw := bufio.NewReaderSize(c, 4096), bufio.NewWriterSize(c, 4096)
	resp := newEchoResponse()
	for {
		_, correlationID, err := readEchoFrame(br)
		if err != nil {
			return
		}
		binary.BigEndian.PutUint32(resp[4:8], correlationID)
		if _, err := bw.Write(resp); err != nil {
			return
		}
		if br.Buffered() == 0 {
			if err := bw.Flush(); err != nil {
				return
			}
		}
	}
}

// newEchoResponse returns the echo server's answer to every frame, its
// correlation id to fill.
func newEchoResponse() []byte {
	resp := make([]byte, echoResponseSize)
	binary.BigEndian.PutUint32(resp, echoResponseSize-4)
	return resp
}

// readEchoFrame reads one request frame from br and returns its API key
// and correlation id; a frame shorter than a request header's first 8
// bytes, or longer than maxEchoFrame, is an error.
func readEchoFrame(br *bufio.Reader) (key int16, correlationID uint32, err error) {
	var size [4]byte
	if _, err := io.ReadFull(br, size[:]); err != nil {
		return 0, 0, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 8 || n > maxEchoFrame {
		return 0, 0, fmt.Errorf("a frame of %d bytes", n)
	}
	head, err := br.Peek(8) // key, version, correlation id
	if err != nil {
		return 0, 0, err
	}
	key, correlationID = int16(binary.BigEndian.Uint16(head)), binary.BigEndian.Uint32(head[4:8])
	_, err = br.Discard(int(n))
	return key, correlationID, err
}

// childStats is what the kafkanet child reports on a "stats" line.
type childStats struct {
	DataQueue    int `json:"data_queue"`
	DataQueueCap int `json:"data_queue_cap"`
	Connections  int `json:"connections"`
	Blocked      int `json:"blocked"` // requests its handler holds unanswered
	// The data plane's request memory pool (queued.max.request.bytes), for
	// scenario h: the bytes in use and the time it has been spent.
	RequestMemorySize     int64   `json:"request_memory_size"` // 0: no budget
	RequestMemoryUsed     int64   `json:"request_memory_used"`
	RequestMemoryDepleted float64 `json:"request_memory_depleted_ms"`
	// MemoryLimit is the Go runtime's memory limit (GOMEMLIMIT;
	// math.MaxInt64 when none is set).
	MemoryLimit int64 `json:"memory_limit"`

	// From runtime.MemStats, after a GC, for scenario (c)'s breakdown.
	HeapAlloc    uint64 `json:"heap_alloc"`
	HeapSys      uint64 `json:"heap_sys"`
	HeapIdle     uint64 `json:"heap_idle"`
	HeapReleased uint64 `json:"heap_released"`
	StackInuse   uint64 `json:"stack_inuse"`
	Sys          uint64 `json:"sys"`
	NextGC       uint64 `json:"next_gc"`
	NumGC        uint32 `json:"num_gc"`
	// StackStart is the stack the runtime gives a new goroutine
	// (/gc/stack/starting-size:bytes): the average its last collection saw.
	StackStart uint64 `json:"stack_start"`
}

// kafkanetProperties returns the minimal server's broker properties: a
// CLIENT listener (PLAINTEXT, or SSL with the PEM key store inline) and a
// CONTROLLER listener, the control plane unless spec.SharedControl.
func kafkanetProperties(spec childSpec) config.Properties {
	protocol := "PLAINTEXT"
	if spec.TLS {
		protocol = "SSL"
	}
	p := config.Properties{
		config.KeyListeners:               fmt.Sprintf("%s://%s,%s://%s", clientListener, spec.Addr, controlListener, spec.ControlAddr),
		config.KeySecurityProtocolMap:     fmt.Sprintf("%s:%s,%s:PLAINTEXT", clientListener, protocol, controlListener),
		config.KeyInterBrokerListenerName: clientListener,
	}
	if !spec.SharedControl {
		p[config.KeyControlPlaneListenerName] = controlListener
	}
	if spec.TLS {
		prefix := "listener.name.client."
		p[prefix+config.KeySSLKeystoreType] = "PEM"
		p[prefix+config.KeySSLKeystoreKey] = os.Getenv(envTLSKey)
		p[prefix+config.KeySSLKeystoreCertificateChain] = os.Getenv(envTLSChain)
	}
	for _, kv := range spec.Props {
		k, v, _ := strings.Cut(kv, "=")
		p[k] = v
	}
	return p
}

// minimalHandler is the minimal kafkanet server's host: a fixed Metadata
// response, Produce acknowledged and discarded, InitProducerId,
// CreateTopics (the bench topic already exists) and ListClientConnections
// (KIP-1329, under connregistry.DefaultListAPIKey as the example broker serves
// it by default). ApiVersions is the server's own.
type minimalHandler struct {
	ctx      context.Context // ends when the child stops: blocked requests are released
	metadata *kmsg.MetadataResponse
	blockKey int
	blocked  atomic.Int64
	offset   atomic.Int64 // base offset handed to the next produced batch
	pid      atomic.Int64
}

// minimalAPIs are the minimal server's APIs. With inline, h answers the
// host's APIs on the connections' goroutines (socketserver.Inline) instead
// of through Serve's queue.
func minimalAPIs(h socketserver.Handler, inline bool) []socketserver.API {
	api := socketserver.KmsgAPI
	host := []socketserver.API{
		api(kmsg.Metadata, 0, 12), // v13 would need topic ids; names keep the fixed response small
		api(kmsg.Produce, 3, 12),
		api(kmsg.InitProducerID, 0, 4),
		api(kmsg.CreateTopics, 0, 7),
	}
	if inline {
		host = socketserver.Inline(h, host...)
	}
	return append(host, socketserver.ListClientConnectionsAPI(connregistry.DefaultListAPIKey, nil))
}

// fixedMetadata is the minimal server's Metadata response: itself as node
// 0 at addr, and the bench topic with its partitions led by node 0.
func fixedMetadata(addr string) (*kmsg.MetadataResponse, error) {
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
	resp.ClusterID = kmsg.StringPtr("kafkanet-bench")
	resp.ControllerID = 0
	t := kmsg.NewMetadataResponseTopic()
	t.Topic = kmsg.StringPtr(benchTopic)
	for i := range int32(benchPartitions) {
		part := kmsg.NewMetadataResponseTopicPartition()
		part.Partition, part.Leader, part.Replicas, part.ISR = i, 0, []int32{0}, []int32{0}
		t.Partitions = append(t.Partitions, part)
	}
	resp.Topics = []kmsg.MetadataResponseTopic{t}
	return resp, nil
}

// ServeKafka answers one request.
func (h *minimalHandler) ServeKafka(r *socketserver.Request) {
	if int(r.APIKey) == h.blockKey && r.Conn.Listener == clientListener {
		h.blocked.Add(1)
		<-h.ctx.Done() // never answered: the handler goroutine stays blocked
		return
	}
	var resp kmsg.Response
	switch req := r.Body.(type) {
	case *kmsg.MetadataRequest:
		m := *h.metadata // a shallow copy: Respond sets its version
		resp = &m
	case *kmsg.ProduceRequest:
		resp = h.produce(req)
		if req.Acks == 0 {
			_ = r.NoResponse()
			return
		}
	case *kmsg.InitProducerIDRequest:
		ip := kmsg.NewPtrInitProducerIDResponse()
		ip.ProducerID = h.pid.Add(1)
		resp = ip
	case *kmsg.CreateTopicsRequest:
		resp = createTopicsExist(req)
	default:
		_ = r.CloseConnection()
		return
	}
	if err := r.Respond(resp); err != nil {
		_ = r.CloseConnection()
	}
}

// produce acknowledges every partition of req, discarding the records, with
// base offsets that advance by one per partition written.
func (h *minimalHandler) produce(req *kmsg.ProduceRequest) *kmsg.ProduceResponse {
	resp := kmsg.NewPtrProduceResponse()
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset = h.offset.Add(1) - 1
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// createTopicsExist answers that every topic asked for exists already.
func createTopicsExist(req *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse {
	resp := kmsg.NewPtrCreateTopicsResponse()
	for _, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.ErrorCode = t.Topic, kerr.TopicAlreadyExists.Code
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// serveKafkanet runs the minimal server on socketserver, with Kafka's
// defaults for every socket-server key (3 network threads, 8 handler
// goroutines, a data-plane queue of 500), until ctx ends.
func serveKafkanet(ctx context.Context, spec childSpec, stdin io.Reader, stdout io.Writer) error {
	cfg, err := config.Server(kafkanetProperties(spec))
	if err != nil {
		return err
	}
	metadata, err := fixedMetadata(spec.Addr)
	if err != nil {
		return err
	}
	h := &minimalHandler{ctx: ctx, metadata: metadata, blockKey: spec.BlockKey}
	cfg.APIs = minimalAPIs(h, spec.Kind == kafkanetInlineServer)
	srv, err := socketserver.New(cfg)
	if err != nil {
		return err
	}
	if err := srv.Start(ctx); err != nil {
		return err
	}
	defer srv.Close()
	go answerStats(stdin, stdout, srv, h, cfg.QueuedMaxRequests)
	served := make(chan error, 2)
	go func() { served <- srv.Serve(ctx, protocolmap.DataPlane, h) }()
	if cfg.Listeners.ControlPlaneListener != "" {
		go func() { served <- srv.Serve(ctx, protocolmap.ControlPlane, h) }()
	} else {
		served <- nil
	}
	<-ctx.Done()
	srv.Close()
	for range 2 {
		<-served
	}
	return nil
}

// answerStats answers each "stats" line of in with a JSON line of
// childStats on out, until in ends (the parent closed it or went away).
func answerStats(in io.Reader, out io.Writer, srv *socketserver.Server, h *minimalHandler, queueCap int) {
	sc := bufio.NewScanner(in)
	enc := json.NewEncoder(out)
	for sc.Scan() {
		ask := sc.Text()
		if ask != "stats" && ask != "memstats" && ask != "freeosmemory" {
			continue
		}
		if ask == "freeosmemory" {
			// Scenario c's last reading: the memory the runtime keeps
			// free for the heap to grow into, given back to the system.
			debug.FreeOSMemory()
			ask = "memstats"
		}
		st := srv.Stats()
		cs := childStats{DataQueue: st.RequestQueueSize[protocolmap.DataPlane], DataQueueCap: queueCap, Blocked: int(h.blocked.Load()),
			MemoryLimit: debug.SetMemoryLimit(-1)}
		if m, ok := st.RequestMemory[protocolmap.DataPlane]; ok {
			cs.RequestMemorySize, cs.RequestMemoryUsed = int64(m.Size), int64(m.Used)
			cs.RequestMemoryDepleted = float64(m.Depleted) / float64(time.Millisecond)
		}
		for _, n := range st.ConnectionCount {
			cs.Connections += n
		}
		if ask == "memstats" {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			cs.HeapAlloc, cs.HeapSys, cs.HeapIdle, cs.HeapReleased, cs.StackInuse, cs.Sys, cs.NextGC, cs.NumGC = ms.HeapAlloc, ms.HeapSys, ms.HeapIdle, ms.HeapReleased, ms.StackInuse, ms.Sys, ms.NextGC, ms.NumGC
			start := []metrics.Sample{{Name: "/gc/stack/starting-size:bytes"}}
			if metrics.Read(start); start[0].Value.Kind() == metrics.KindUint64 {
				cs.StackStart = start[0].Value.Uint64()
			}
		}
		if err := enc.Encode(cs); err != nil {
			return
		}
	}
}
