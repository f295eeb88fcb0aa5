// Package clientmatrix runs eight independently written Kafka client
// stacks against a cluster, for the compatibility matrices of
// examples/broker (the broker itself) and examples/proxy (the proxy in
// front of it): franz-go kgo, IBM/sarama and segmentio/kafka-go in the
// calling process, kcat and confluent-kafka-python (librdkafka),
// kafka-python, kafkajs and @platformatic/kafka as programs.
//
// Each check, given a [Cell] (a bootstrap address, a SASL mechanism or
// none, TLS or not, a topic and maybe a consumer group), reads the
// cluster's metadata, creates the topic with [Partitions] partitions,
// produces [Records] records spread over them and consumes them back: from
// assigned partitions, or through the group (join, consume, commit,
// leave). It returns a line "OK CLIENT VERSION MECHANISM brokers=B ..." (B
// the brokers the client's metadata lists, see [Brokers]), or an error
// that says [AuthFailed] when the server refused the password. [Verify]
// then checks with a kgo client, independently of the checked client, what
// the check did.
//
// The programs of the non-Go clients are in testdata/clients; each takes
// BOOTSTRAP MECHANISM USER PASSWORD TOPIC [GROUP] and, for TLS, the CA
// file in the KAFKANET_CHECK_CA environment variable, and prints the same
// line or exits 1. The node clients need `npm ci --prefix
// examples/internal/clientmatrix/testdata/clients/node`.
package clientmatrix

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafkago "github.com/segmentio/kafka-go"
	kafkagosasl "github.com/segmentio/kafka-go/sasl"
	kafkagoplain "github.com/segmentio/kafka-go/sasl/plain"
	kafkagoscram "github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/xdg-go/scram"

	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

const (
	// Partitions and Records are the topic a check creates and what it
	// produces: record i goes to partition i mod Partitions.
	Partitions = 3
	Records    = 9
	// NoSASL is the mechanism of a cell on a listener without SASL.
	NoSASL = "PLAINTEXT"
	// AuthFailed is what a check's error says when the server refused the
	// password.
	AuthFailed = "SASL authentication failed"
	// caEnv passes a cell's CA file to the programs: set, they connect
	// with TLS and trust it.
	caEnv = "KAFKANET_CHECK_CA"
)

// DebianPython is the interpreter of Debian's python3-kafka and
// python3-confluent-kafka packages. A python3 earlier on PATH (pyenv, a
// virtualenv) may not see them.
const DebianPython = "/usr/bin/python3"

// Cell is what one check runs against.
type Cell struct {
	Bootstrap      string
	Mechanism      string // a SASL mechanism, or NoSASL
	User, Password string
	TLSCA          string // a PEM CA file: connect with TLS and trust it; "" for no TLS
	Topic          string
	Group          string // "": consume assigned partitions
}

// securityProtocol is Kafka's name of the cell's protocol.
func (c Cell) securityProtocol() string {
	switch {
	case c.Mechanism != NoSASL && c.TLSCA != "":
		return "SASL_SSL"
	case c.Mechanism != NoSASL:
		return "SASL_PLAINTEXT"
	case c.TLSCA != "":
		return "SSL"
	}
	return "PLAINTEXT"
}

// tlsConfig returns the TLS configuration of a Go client, nil without TLS.
func (c Cell) tlsConfig() (*tls.Config, error) {
	if c.TLSCA == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(c.TLSCA)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", c.TLSCA)
	}
	return &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}, nil
}

// Client is one client stack.
type Client struct {
	Name    string
	Install string // what installs it, for a skip message
	// Probe returns the client's version, or why it cannot run here.
	Probe func() (version, missing string)
	// GroupOnly clients consume only through a consumer group: without one
	// they check the high watermarks instead (kafkajs).
	GroupOnly bool
	// Lacks maps a SASL mechanism the client does not implement to why.
	Lacks map[string]string
	Run   func(ctx context.Context, c Cell) (string, error)
}

// Require probes a client (its name, what installs it, and its probe, as
// in [Client]) and returns its version. A client that cannot run here is
// reported as a subtest of t named after it, skipped, or failed when CI
// is set (.ci/run sets it: CI must run every client), and ok is false.
func Require(t *testing.T, name, install string, probe func() (version, missing string)) (version string, ok bool) {
	t.Helper()
	version, missing := probe()
	if missing == "" {
		return version, true
	}
	t.Run(name, func(t *testing.T) {
		if os.Getenv("CI") == "" {
			t.Skipf("%s (%s); in CI this fails", missing, install)
		}
		t.Fatalf("%s is required in CI: %s (%s)", name, missing, install)
	})
	return "", false
}

// Clients are the eight implementations of the protocol (librdkafka
// behind kcat and confluent-kafka-python).
var Clients = []Client{
	{Name: "franz-go kgo", Install: "go.mod", Probe: GoModule("github.com/twmb/franz-go"), Run: runKgo},
	{Name: "IBM/sarama", Install: "go.mod", Probe: GoModule("github.com/IBM/sarama"), Run: runSarama},
	{Name: "segmentio/kafka-go", Install: "go.mod", Probe: GoModule("github.com/segmentio/kafka-go"), Run: runKafkaGo},
	{Name: "kcat", Install: "apt-get install kcat", Probe: ProbeKcat, Run: runKcat},
	scriptClient("confluent-kafka", "apt-get install python3-confluent-kafka",
		ProbePython("confluent_kafka", "print(confluent_kafka.version()[0] + ' (librdkafka ' + confluent_kafka.libversion()[0] + ')')"),
		DebianPython, "confluent_check.py"),
	scriptClient("kafka-python", "apt-get install python3-kafka",
		ProbePython("kafka", "print(kafka.__version__)"), DebianPython, "kafka_python_check.py"),
	withGroupOnly(scriptClient("kafkajs", NodeInstall, ProbeNode("kafkajs"), "node", "kafkajs_check.js")),
	scriptClient("platformatic-kafka", NodeInstall, ProbeNode("@platformatic/kafka"), "node", "platformatic_check.mjs"),
}

// NodeInstall says how to install the node clients.
var NodeInstall = "apt-get install nodejs npm; npm ci --prefix " + filepath.ToSlash(filepath.Join("examples", "internal", "clientmatrix", "testdata", "clients", "node"))

func withGroupOnly(c Client) Client { c.GroupOnly = true; return c }

var brokersLine = regexp.MustCompile(`\bbrokers=(\d+)\b`)

// Brokers returns the broker count a check's OK line reports.
func Brokers(out string) (int, bool) {
	m := brokersLine.FindStringSubmatch(out)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil
}

// examplesRoot finds the examples module's directory by walking up from
// the working directory (a test's is its package's): the programs and
// go.mod are found from it.
var examplesRoot = sync.OnceValues(func() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if raw, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			regexp.MustCompile(`(?m)^module github\.com/kafkanet/kafkanet/examples\s*$`).Match(raw) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("clientmatrix: not inside the kafkanet examples module")
		}
		dir = parent
	}
})

// Dir is the directory of the client programs, and node/ the npm project
// of the node clients.
func Dir() (string, error) {
	root, err := examplesRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "internal", "clientmatrix", "testdata", "clients"), nil
}

// GoModule returns the version of a Go client as the examples module
// requires it.
func GoModule(path string) func() (string, string) {
	return func() (string, string) {
		if info, ok := debug.ReadBuildInfo(); ok {
			for _, m := range info.Deps {
				if m.Path == path {
					return m.Version, ""
				}
			}
		}
		root, err := examplesRoot()
		if err != nil {
			return "", err.Error()
		}
		raw, err := os.ReadFile(filepath.Join(root, "go.mod"))
		if err != nil {
			return "", "cannot read go.mod: " + err.Error()
		}
		m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(path) + `\s+(\S+)`).FindSubmatch(raw)
		if m == nil {
			return "", path + " is not in go.mod"
		}
		return string(m[1]), ""
	}
}

// ProbeKcat returns kcat's version and librdkafka's, or why kcat cannot
// run here.
func ProbeKcat() (string, string) {
	if _, err := exec.LookPath("kcat"); err != nil {
		return "", "kcat is missing"
	}
	out, err := exec.Command("kcat", "-V").CombinedOutput()
	if err != nil {
		return "", "kcat -V: " + err.Error()
	}
	// "Version 1.7.1 (JSON, ..., librdkafka 2.0.2 builtin.features=...)"
	m := regexp.MustCompile(`Version (\S+) .*librdkafka (\S+)`).FindSubmatch(out)
	if m == nil {
		return "?", ""
	}
	return fmt.Sprintf("%s (librdkafka %s)", m[1], m[2]), ""
}

// ProbePython returns a probe of a Python module of Debian's python3,
// printing its version with printVersion.
func ProbePython(module, printVersion string) func() (string, string) {
	return func() (string, string) {
		if _, err := os.Stat(DebianPython); err != nil {
			return "", DebianPython + " is missing"
		}
		out, err := exec.Command(DebianPython, "-c", "import "+module+"; "+printVersion).CombinedOutput()
		if err != nil {
			return "", "python module " + module + " is missing: " + strings.TrimSpace(string(out))
		}
		return strings.TrimSpace(string(out)), ""
	}
}

// ProbeNode returns a probe of an npm package of the node clients.
func ProbeNode(pkg string) func() (string, string) {
	return func() (string, string) {
		if _, err := exec.LookPath("node"); err != nil {
			return "", "node is missing"
		}
		dir, err := Dir()
		if err != nil {
			return "", err.Error()
		}
		raw, err := os.ReadFile(filepath.Join(dir, "node", "node_modules", filepath.FromSlash(pkg), "package.json"))
		if err != nil {
			return "", pkg + " is not installed in " + filepath.Join(dir, "node")
		}
		var p struct{ Version string }
		if err := json.Unmarshal(raw, &p); err != nil {
			return "", pkg + ": " + err.Error()
		}
		return p.Version, ""
	}
}

// scriptClient runs testdata/clients/script with program.
func scriptClient(name, install string, probe func() (string, string), program, script string) Client {
	return Client{Name: name, Install: install, Probe: probe, Run: func(ctx context.Context, c Cell) (string, error) {
		dir, err := Dir()
		if err != nil {
			return "", err
		}
		args := []string{filepath.Join(dir, script), c.Bootstrap, c.Mechanism, c.User, c.Password, c.Topic}
		if c.Group != "" {
			args = append(args, c.Group)
		}
		return runProgram(ctx, name, []string{caEnv + "=" + c.TLSCA}, program, args...)
	}}
}

// RunProgram runs a check program (such as a script of Dir with program
// DebianPython or node) and returns its standard output; its error
// carries the standard error, and says a check's own failure ("FAIL
// name: ...") apart from the program's.
func RunProgram(ctx context.Context, name, program string, args ...string) (string, error) {
	return runProgram(ctx, name, nil, program, args...)
}

// runProgram is RunProgram with env added to the program's environment.
func runProgram(ctx context.Context, name string, env []string, program string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, program, args...)
	cmd.Env = append(append(os.Environ(), "KAFKAJS_NO_PARTITIONER_WARNING=1"), env...)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		return stdout.String(), fmt.Errorf("%s timed out: %w\nstdout: %s\nstderr: %s", name, ctx.Err(), &stdout, &stderr)
	}
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 1 && strings.Contains(stderr.String(), "FAIL "+name+": ") {
			return stdout.String(), errors.New(strings.TrimSpace(stderr.String()))
		}
		return stdout.String(), fmt.Errorf("%s: %w (not a check's failure)\nstdout: %s\nstderr: %s", name, err, &stdout, &stderr)
	}
	return stdout.String(), nil
}

// values are the records' values; value i goes to partition i mod
// Partitions.
func values() []string {
	out := make([]string, Records)
	for i := range out {
		out[i] = "value-" + strconv.Itoa(i)
	}
	return out
}

// checkConsumed compares what a client consumed with values.
func checkConsumed(got []string) error {
	got = slices.Sorted(slices.Values(got))
	if want := values(); !slices.Equal(got, want) {
		return fmt.Errorf("consumed %q, want %q", got, want)
	}
	return nil
}

// okLine is the line a check returns on success.
func okLine(client, version string, c Cell, brokers int) string {
	how := "from assigned partitions"
	if c.Group != "" {
		how = "through group " + c.Group + ", committed"
	}
	return fmt.Sprintf("OK %s %s %s brokers=%d produced and consumed %d records %s", client, version, c.Mechanism, brokers, Records, how)
}

// AuthError marks err as a refused password (its message then holds
// AuthFailed) when is says it is one.
func AuthError(err error, is bool) error {
	if is {
		return fmt.Errorf("%s: %w", AuthFailed, err)
	}
	return err
}

// Verify checks with cl, which reaches the cluster on its own, that the
// cell's topic holds Records records in Partitions partitions and, for a
// group cell, that the group committed the end of every partition.
func Verify(ctx context.Context, cl *kgo.Client, c Cell) error {
	list := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = c.Topic
	for p := range int32(Partitions) {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp = p, -1
		lt.Partitions = append(lt.Partitions, lp)
	}
	list.Topics = append(list.Topics, lt)
	listed, err := list.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("verify: ListOffsets: %w", err)
	}
	high := map[int32]int64{}
	var total int64
	for _, rt := range listed.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return fmt.Errorf("verify: ListOffsets %s[%d]: %w", c.Topic, rp.Partition, err)
			}
			high[rp.Partition] = rp.Offset
			total += rp.Offset
		}
	}
	if len(high) != Partitions || total != Records {
		return fmt.Errorf("verify: the topic's high watermarks are %v, want %d records in %d partitions", high, Records, Partitions)
	}
	if c.Group == "" {
		return nil
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Group = c.Group
	ft := kmsg.NewOffsetFetchRequestTopic()
	ft.Topic, ft.Partitions = c.Topic, []int32{0, 1, 2}
	fetch.Topics = append(fetch.Topics, ft)
	fetched, err := fetch.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(fetched.ErrorCode)
	}
	if err != nil {
		return fmt.Errorf("verify: OffsetFetch: %w", err)
	}
	committed := map[int32]int64{}
	for _, rt := range fetched.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return fmt.Errorf("verify: OffsetFetch %s[%d]: %w", c.Topic, rp.Partition, err)
			}
			committed[rp.Partition] = rp.Offset
		}
	}
	for p, h := range high {
		if committed[p] != h {
			return fmt.Errorf("verify: group %s committed %v, want the high watermarks %v", c.Group, committed, high)
		}
	}
	return nil
}

func runKgo(ctx context.Context, c Cell) (string, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Bootstrap), kgo.ClientID("kgo-matrix"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	}
	if c.Mechanism != NoSASL {
		opts = append(opts, socketservertest.KgoSASL(c.Mechanism, c.User, c.Password))
	}
	tlsCfg, err := c.tlsConfig()
	if err != nil {
		return "", err
	}
	if tlsCfg != nil {
		opts = append(opts, kgo.DialTLSConfig(tlsCfg))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return "", err
	}
	defer cl.Close()
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return "", AuthError(fmt.Errorf("metadata: %w", err), errors.Is(err, kerr.SaslAuthenticationFailed))
	}
	create := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = c.Topic, Partitions, 1
	create.Topics = append(create.Topics, rt)
	created, err := create.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(created.Topics[0].ErrorCode)
	}
	if err != nil {
		return "", fmt.Errorf("create topic: %w", err)
	}
	var records []*kgo.Record
	for i, v := range values() {
		records = append(records, &kgo.Record{Topic: c.Topic, Partition: int32(i % Partitions), Value: []byte(v)})
	}
	if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
		return "", fmt.Errorf("produce: %w", err)
	}

	consumeOpts := append(opts[:len(opts):len(opts)], kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if c.Group == "" {
		partitions := map[int32]kgo.Offset{}
		for p := range int32(Partitions) {
			partitions[p] = kgo.NewOffset().AtStart()
		}
		consumeOpts = append(consumeOpts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{c.Topic: partitions}))
	} else {
		consumeOpts = append(consumeOpts, kgo.ConsumerGroup(c.Group), kgo.ConsumeTopics(c.Topic), kgo.DisableAutoCommit())
	}
	consumer, err := kgo.NewClient(consumeOpts...)
	if err != nil {
		return "", err
	}
	defer consumer.Close() // leaves the group
	var got []string
	for len(got) < Records {
		fetches := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return "", fmt.Errorf("consumed %d of %d records: %w", len(got), Records, err)
		}
		if err := fetches.Err(); err != nil {
			return "", fmt.Errorf("consume: %w", err)
		}
		for _, r := range fetches.Records() {
			got = append(got, string(r.Value))
		}
	}
	if err := checkConsumed(got); err != nil {
		return "", err
	}
	if c.Group != "" {
		if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
			return "", fmt.Errorf("commit: %w", err)
		}
	}
	version, _ := GoModule("github.com/twmb/franz-go")()
	return okLine("franz-go kgo", version, c, len(meta.Brokers)), nil
}

// xdgSCRAM is sarama's SCRAM client, on xdg-go/scram (as sarama's own
// example does).
type xdgSCRAM struct {
	hash scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

func (x *xdgSCRAM) Begin(user, password, authzID string) error {
	client, err := x.hash.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	x.conv = client.NewConversation()
	return nil
}

func (x *xdgSCRAM) Step(challenge string) (string, error) { return x.conv.Step(challenge) }
func (x *xdgSCRAM) Done() bool                            { return x.conv.Done() }

func runSarama(ctx context.Context, c Cell) (string, error) {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.ClientID = "sarama-matrix"
	cfg.Net.DialTimeout = 10 * time.Second
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.MaxWaitTime = 500 * time.Millisecond
	cfg.Consumer.Group.Session.Timeout = 10 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = time.Second
	tlsCfg, err := c.tlsConfig()
	if err != nil {
		return "", err
	}
	if tlsCfg != nil {
		cfg.Net.TLS.Enable, cfg.Net.TLS.Config = true, tlsCfg
	}
	if c.Mechanism != NoSASL {
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.User, cfg.Net.SASL.Password = c.User, c.Password
		switch c.Mechanism {
		case "PLAIN":
			cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
		case "SCRAM-SHA-256":
			cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
			cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &xdgSCRAM{hash: scram.SHA256} }
		case "SCRAM-SHA-512":
			cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
			cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &xdgSCRAM{hash: scram.SHA512} }
		}
	}
	client, err := sarama.NewClient([]string{c.Bootstrap}, cfg)
	if err != nil {
		return "", AuthError(fmt.Errorf("connect: %w", err),
			errors.Is(err, sarama.ErrSASLAuthenticationFailed) || strings.Contains(err.Error(), sarama.ErrSASLAuthenticationFailed.Error()))
	}
	defer client.Close()
	brokers := len(client.Brokers())
	admin, err := sarama.NewClusterAdminFromClient(client) // not closed: that would close client
	if err != nil {
		return "", err
	}
	if err := admin.CreateTopic(c.Topic, &sarama.TopicDetail{NumPartitions: Partitions, ReplicationFactor: 1}, false); err != nil {
		return "", fmt.Errorf("create topic: %w", err)
	}
	producer, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		return "", err
	}
	var msgs []*sarama.ProducerMessage
	for i, v := range values() {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: c.Topic, Partition: int32(i % Partitions), Value: sarama.StringEncoder(v)})
	}
	err = producer.SendMessages(msgs)
	if cerr := producer.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("produce: %w", err)
	}

	var got []string
	if c.Group == "" {
		got, err = saramaConsumePartitions(ctx, client, c.Topic)
	} else {
		got, err = saramaConsumeGroup(ctx, client, c.Topic, c.Group)
	}
	if err != nil {
		return "", err
	}
	if err := checkConsumed(got); err != nil {
		return "", err
	}
	version, _ := GoModule("github.com/IBM/sarama")()
	return okLine("IBM/sarama", version, c, brokers), nil
}

func saramaConsumePartitions(ctx context.Context, client sarama.Client, topic string) ([]string, error) {
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	var got []string
	for p := range int32(Partitions) {
		pc, err := consumer.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			return nil, fmt.Errorf("consume partition %d: %w", p, err)
		}
		for range Records / Partitions {
			select {
			case m := <-pc.Messages():
				got = append(got, string(m.Value))
			case err := <-pc.Errors():
				pc.AsyncClose()
				return nil, fmt.Errorf("consume partition %d: %w", p, err)
			case <-ctx.Done():
				pc.AsyncClose()
				return nil, fmt.Errorf("consumed %d records: %w", len(got), ctx.Err())
			}
		}
		if err := pc.Close(); err != nil {
			return nil, fmt.Errorf("close partition consumer %d: %w", p, err)
		}
	}
	return got, nil
}

// saramaGroup consumes until it has every record, then commits.
type saramaGroup struct {
	mu   sync.Mutex
	got  []string
	done context.CancelFunc
}

func (*saramaGroup) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (*saramaGroup) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaGroup) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			sess.MarkMessage(m, "")
			h.mu.Lock()
			h.got = append(h.got, string(m.Value))
			all := len(h.got) == Records
			h.mu.Unlock()
			if all {
				sess.Commit()
				h.done()
			}
		case <-sess.Context().Done():
			return nil
		}
	}
}

func saramaConsumeGroup(ctx context.Context, client sarama.Client, topic, group string) ([]string, error) {
	cg, err := sarama.NewConsumerGroupFromClient(group, client)
	if err != nil {
		return nil, err
	}
	defer cg.Close() // leaves the group
	consumeCtx, done := context.WithCancel(ctx)
	defer done()
	h := &saramaGroup{done: done}
	for consumeCtx.Err() == nil { // Consume returns at each rebalance
		if err := cg.Consume(consumeCtx, []string{topic}, h); err != nil {
			return nil, fmt.Errorf("consume: %w", err)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.got) < Records {
		return nil, fmt.Errorf("consumed %d of %d records: %w", len(h.got), Records, ctx.Err())
	}
	return h.got, nil
}

func runKafkaGo(ctx context.Context, c Cell) (string, error) {
	var mech kafkagosasl.Mechanism
	switch c.Mechanism {
	case "PLAIN":
		mech = kafkagoplain.Mechanism{Username: c.User, Password: c.Password}
	case "SCRAM-SHA-256", "SCRAM-SHA-512":
		algo := kafkagoscram.SHA256
		if c.Mechanism == "SCRAM-SHA-512" {
			algo = kafkagoscram.SHA512
		}
		var err error
		if mech, err = kafkagoscram.Mechanism(algo, c.User, c.Password); err != nil {
			return "", err
		}
	}
	tlsCfg, err := c.tlsConfig()
	if err != nil {
		return "", err
	}
	dialer := &kafkago.Dialer{Timeout: 10 * time.Second, ClientID: "kafka-go-matrix", SASLMechanism: mech, TLS: tlsCfg}
	// The Conn API sends Metadata v1 with no ApiVersions first.
	conn, err := dialer.DialContext(ctx, "tcp", c.Bootstrap)
	if err != nil {
		return "", AuthError(fmt.Errorf("dial: %w", err), errors.Is(err, kafkago.SASLAuthenticationFailed))
	}
	defer conn.Close()
	brokers, err := conn.Brokers()
	if err != nil {
		return "", fmt.Errorf("metadata: %w", err)
	}
	controller, err := conn.Controller()
	if err != nil {
		return "", fmt.Errorf("controller: %w", err)
	}
	cc, err := dialer.DialContext(ctx, "tcp", net.JoinHostPort(controller.Host, strconv.Itoa(controller.Port)))
	if err != nil {
		return "", fmt.Errorf("dial the controller: %w", err)
	}
	err = cc.CreateTopics(kafkago.TopicConfig{Topic: c.Topic, NumPartitions: Partitions, ReplicationFactor: 1})
	cc.Close()
	if err != nil {
		return "", fmt.Errorf("create topic: %w", err)
	}

	transport := &kafkago.Transport{DialTimeout: 10 * time.Second, ClientID: "kafka-go-matrix", SASL: mech, TLS: tlsCfg}
	defer transport.CloseIdleConnections()
	w := &kafkago.Writer{
		Addr: kafkago.TCP(c.Bootstrap), Topic: c.Topic, Transport: transport,
		RequiredAcks: kafkago.RequireAll, BatchTimeout: 10 * time.Millisecond,
		Balancer: kafkago.BalancerFunc(func(m kafkago.Message, _ ...int) int { p, _ := strconv.Atoi(string(m.Key)); return p }),
	}
	var msgs []kafkago.Message
	for i, v := range values() {
		msgs = append(msgs, kafkago.Message{Key: []byte(strconv.Itoa(i % Partitions)), Value: []byte(v)})
	}
	err = w.WriteMessages(ctx, msgs...)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("produce: %w", err)
	}

	var got []string
	if c.Group == "" {
		for p := range Partitions {
			r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: []string{c.Bootstrap}, Topic: c.Topic, Partition: p,
				Dialer: dialer, MaxWait: 500 * time.Millisecond})
			for range Records / Partitions {
				m, err := r.ReadMessage(ctx)
				if err != nil {
					r.Close()
					return "", fmt.Errorf("consume partition %d: %w", p, err)
				}
				got = append(got, string(m.Value))
			}
			if err := r.Close(); err != nil {
				return "", fmt.Errorf("close reader: %w", err)
			}
		}
	} else {
		r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: []string{c.Bootstrap}, GroupID: c.Group, Topic: c.Topic,
			Dialer: dialer, StartOffset: kafkago.FirstOffset, MaxWait: 500 * time.Millisecond,
			HeartbeatInterval: time.Second, SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second,
			JoinGroupBackoff: 500 * time.Millisecond})
		var fetched []kafkago.Message
		for len(fetched) < Records {
			m, err := r.FetchMessage(ctx)
			if err != nil {
				r.Close()
				return "", fmt.Errorf("consumed %d of %d records: %w", len(fetched), Records, err)
			}
			fetched = append(fetched, m)
			got = append(got, string(m.Value))
		}
		err := r.CommitMessages(ctx, fetched...)
		if cerr := r.Close(); err == nil { // leaves the group
			err = cerr
		}
		if err != nil {
			return "", fmt.Errorf("commit: %w", err)
		}
	}
	if err := checkConsumed(got); err != nil {
		return "", err
	}
	version, _ := GoModule("github.com/segmentio/kafka-go")()
	return okLine("segmentio/kafka-go", version, c, len(brokers)), nil
}

// runKcat runs kcat for each step. kcat cannot create topics: producing
// to a new one creates it (auto.create.topics.enable, with the cluster's
// num.partitions).
func runKcat(ctx context.Context, c Cell) (string, error) {
	version, _ := ProbeKcat()
	base := []string{"-b", c.Bootstrap, "-m", "5", "-X", "security.protocol=" + c.securityProtocol()}
	if c.Mechanism != NoSASL {
		base = append(base, "-X", "sasl.mechanisms="+c.Mechanism, "-X", "sasl.username="+c.User, "-X", "sasl.password="+c.Password)
	}
	if c.TLSCA != "" {
		base = append(base, "-X", "ssl.ca.location="+c.TLSCA)
	}
	kcat := func(stdin string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "kcat", append(slices.Clone(base), args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		cmd.WaitDelay = 5 * time.Second
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return "", AuthError(fmt.Errorf("kcat %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String())),
				strings.Contains(stderr.String(), "SASL authentication error"))
		}
		return stdout.String(), nil
	}
	listing, err := kcat("", "-L")
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?m)^ (\d+) brokers:`).FindStringSubmatch(listing)
	if m == nil {
		return "", fmt.Errorf("kcat -L lists no brokers:\n%s", listing)
	}
	brokers, _ := strconv.Atoi(m[1])
	vals := values()
	for p := range Partitions {
		var lines []string
		for i := p; i < len(vals); i += Partitions {
			lines = append(lines, vals[i])
		}
		if _, err := kcat(strings.Join(lines, "\n")+"\n", "-P", "-t", c.Topic, "-p", strconv.Itoa(p)); err != nil {
			return "", err
		}
	}
	var out string
	if c.Group == "" {
		out, err = kcat("", "-C", "-t", c.Topic, "-o", "beginning", "-e", "-q", "-f", `%s\n`)
	} else { // librdkafka commits the offsets consumed when it leaves
		out, err = kcat("", "-G", c.Group, "-X", "auto.offset.reset=earliest", "-e", "-q", "-f", `%s\n`, c.Topic)
	}
	if err != nil {
		return "", err
	}
	if err := checkConsumed(strings.Fields(out)); err != nil {
		return "", err
	}
	return okLine("kcat", version, c, brokers), nil
}
