package main

import (
	"bytes"
	"context"
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
)

// The client checks of TestClientMatrix. Each one, given a cell (a
// listener, a SASL mechanism or none, a topic and maybe a consumer group),
// reads the cluster's metadata, creates the topic with matrixPartitions
// partitions, produces matrixRecords records spread over them and consumes
// them back: from assigned partitions, or through the group (join,
// consume, commit, leave). It returns a line "OK CLIENT VERSION MECHANISM
// brokers=B ..." (B the brokers the client's metadata lists), or an error
// that says "SASL authentication failed" when the broker refused the
// password. The Go clients run in the test process; the others run the
// scripts in testdata/clients, which take BOOTSTRAP MECHANISM USER
// PASSWORD TOPIC [GROUP] and print the same line or exit 1.

const (
	matrixPartitions = 3
	matrixRecords    = 9
	// noSASL is the mechanism of a cell on a PLAINTEXT listener.
	noSASL = "PLAINTEXT"
	// authFailed is what a check's error says when the broker refused the
	// password.
	authFailed = "SASL authentication failed"
)

// debianPython is the interpreter of Debian's python3-kafka and
// python3-confluent-kafka packages. A python3 earlier on PATH (pyenv, a
// virtualenv) may not see them.
const debianPython = "/usr/bin/python3"

// clientsDir holds the client scripts and node/, the npm project of the
// node clients.
var clientsDir = filepath.Join("testdata", "clients")

// cell is what one check of a client runs against.
type cell struct {
	bootstrap            string
	mech, user, password string // mech is noSASL on a PLAINTEXT listener
	topic                string
	group                string // "": consume assigned partitions
}

// matrixClient is one client stack of the matrix.
type matrixClient struct {
	name    string
	install string // what installs it, for the skip message
	// probe returns the client's version, or why it cannot run here.
	probe func() (version, missing string)
	// groupOnly clients consume only through a consumer group: without one
	// they check the high watermarks instead.
	groupOnly bool
	// lacks maps a SASL mechanism the client does not implement to why.
	lacks map[string]string
	run   func(ctx context.Context, c cell) (string, error)
}

// matrixClients are the clients of TestClientMatrix: eight independent
// implementations of the protocol (librdkafka behind kcat and
// confluent-kafka-python).
var matrixClients = []matrixClient{
	{name: "franz-go kgo", install: "go.mod", probe: goModule("github.com/twmb/franz-go"), run: runKgo},
	{name: "IBM/sarama", install: "go.mod", probe: goModule("github.com/IBM/sarama"), run: runSarama},
	{name: "segmentio/kafka-go", install: "go.mod", probe: goModule("github.com/segmentio/kafka-go"), run: runKafkaGo},
	{name: "kcat", install: "apt-get install kcat", probe: probeKcat, run: runKcat},
	scriptClient("confluent-kafka", "apt-get install python3-confluent-kafka",
		probePython("confluent_kafka", "print(confluent_kafka.version()[0] + ' (librdkafka ' + confluent_kafka.libversion()[0] + ')')"),
		debianPython, "confluent_check.py"),
	scriptClient("kafka-python", "apt-get install python3-kafka",
		probePython("kafka", "print(kafka.__version__)"), debianPython, "kafka_python_check.py"),
	withGroupOnly(scriptClient("kafkajs", nodeInstall, probeNode("kafkajs"), "node", "kafkajs_check.js")),
	scriptClient("platformatic-kafka", nodeInstall, probeNode("@platformatic/kafka"), "node", "platformatic_check.mjs"),
}

var nodeInstall = "apt-get install nodejs npm; npm ci --prefix " + filepath.ToSlash(filepath.Join("examples", "broker", clientsDir, "node"))

func withGroupOnly(c matrixClient) matrixClient { c.groupOnly = true; return c }

// goModule returns the version of a module the test imports, as the
// examples module's go.mod requires it: a test binary's build information lists
// only the modules the package itself imports.
func goModule(path string) func() (string, string) {
	return func() (string, string) {
		if info, ok := debug.ReadBuildInfo(); ok {
			for _, m := range info.Deps {
				if m.Path == path {
					return m.Version, ""
				}
			}
		}
		raw, err := os.ReadFile(filepath.Join("..", "go.mod"))
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

func probeKcat() (string, string) {
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

func probePython(module, printVersion string) func() (string, string) {
	return func() (string, string) {
		if _, err := os.Stat(debianPython); err != nil {
			return "", debianPython + " is missing"
		}
		out, err := exec.Command(debianPython, "-c", "import "+module+"; "+printVersion).CombinedOutput()
		if err != nil {
			return "", "python module " + module + " is missing: " + strings.TrimSpace(string(out))
		}
		return strings.TrimSpace(string(out)), ""
	}
}

func probeNode(pkg string) func() (string, string) {
	return func() (string, string) {
		if _, err := exec.LookPath("node"); err != nil {
			return "", "node is missing"
		}
		raw, err := os.ReadFile(filepath.Join(clientsDir, "node", "node_modules", filepath.FromSlash(pkg), "package.json"))
		if err != nil {
			return "", pkg + " is not installed in " + filepath.Join(clientsDir, "node")
		}
		var p struct{ Version string }
		if err := json.Unmarshal(raw, &p); err != nil {
			return "", pkg + ": " + err.Error()
		}
		return p.Version, ""
	}
}

// scriptClient runs testdata/clients/script with program.
func scriptClient(name, install string, probe func() (string, string), program, script string) matrixClient {
	return matrixClient{name: name, install: install, probe: probe, run: func(ctx context.Context, c cell) (string, error) {
		args := []string{filepath.Join(clientsDir, script), c.bootstrap, c.mech, c.user, c.password, c.topic}
		if c.group != "" {
			args = append(args, c.group)
		}
		return runProgram(ctx, name, program, args...)
	}}
}

// runProgram runs a check program and returns its standard output; its
// error carries the standard error.
func runProgram(ctx context.Context, name, program string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, program, args...)
	cmd.Env = append(os.Environ(), "KAFKAJS_NO_PARTITIONER_WARNING=1")
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

// matrixValues are the records' values; value i goes to partition i mod
// matrixPartitions.
func matrixValues() []string {
	values := make([]string, matrixRecords)
	for i := range values {
		values[i] = "value-" + strconv.Itoa(i)
	}
	return values
}

// checkConsumed compares what a client consumed with matrixValues.
func checkConsumed(got []string) error {
	got = slices.Sorted(slices.Values(got))
	if want := matrixValues(); !slices.Equal(got, want) {
		return fmt.Errorf("consumed %q, want %q", got, want)
	}
	return nil
}

// okLine is the line a check returns on success.
func okLine(client, version string, c cell, brokers int) string {
	how := "from assigned partitions"
	if c.group != "" {
		how = "through group " + c.group + ", committed"
	}
	return fmt.Sprintf("OK %s %s %s brokers=%d produced and consumed %d records %s", client, version, c.mech, brokers, matrixRecords, how)
}

// authError marks err as a refused password when is says it is one.
func authError(err error, is bool) error {
	if is {
		return fmt.Errorf("%s: %w", authFailed, err)
	}
	return err
}

func runKgo(ctx context.Context, c cell) (string, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.bootstrap), kgo.ClientID("kgo-matrix"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	}
	if c.mech != noSASL {
		opts = append(opts, kgo.SASL(saslMechanism(c.mech, c.user, c.password)))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return "", err
	}
	defer cl.Close()
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return "", authError(fmt.Errorf("metadata: %w", err), errors.Is(err, kerr.SaslAuthenticationFailed))
	}
	create := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = c.topic, matrixPartitions, 1
	create.Topics = append(create.Topics, rt)
	created, err := create.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(created.Topics[0].ErrorCode)
	}
	if err != nil {
		return "", fmt.Errorf("create topic: %w", err)
	}
	var records []*kgo.Record
	for i, v := range matrixValues() {
		records = append(records, &kgo.Record{Topic: c.topic, Partition: int32(i % matrixPartitions), Value: []byte(v)})
	}
	if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
		return "", fmt.Errorf("produce: %w", err)
	}

	consumeOpts := append(opts[:len(opts):len(opts)], kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if c.group == "" {
		partitions := map[int32]kgo.Offset{}
		for p := range int32(matrixPartitions) {
			partitions[p] = kgo.NewOffset().AtStart()
		}
		consumeOpts = append(consumeOpts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{c.topic: partitions}))
	} else {
		consumeOpts = append(consumeOpts, kgo.ConsumerGroup(c.group), kgo.ConsumeTopics(c.topic), kgo.DisableAutoCommit())
	}
	consumer, err := kgo.NewClient(consumeOpts...)
	if err != nil {
		return "", err
	}
	defer consumer.Close() // leaves the group
	var got []string
	for len(got) < matrixRecords {
		fetches := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return "", fmt.Errorf("consumed %d of %d records: %w", len(got), matrixRecords, err)
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
	if c.group != "" {
		if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
			return "", fmt.Errorf("commit: %w", err)
		}
	}
	version, _ := goModule("github.com/twmb/franz-go")()
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

func runSarama(ctx context.Context, c cell) (string, error) {
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
	if c.mech != noSASL {
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.User, cfg.Net.SASL.Password = c.user, c.password
		switch c.mech {
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
	client, err := sarama.NewClient([]string{c.bootstrap}, cfg)
	if err != nil {
		return "", authError(fmt.Errorf("connect: %w", err),
			errors.Is(err, sarama.ErrSASLAuthenticationFailed) || strings.Contains(err.Error(), sarama.ErrSASLAuthenticationFailed.Error()))
	}
	defer client.Close()
	brokers := len(client.Brokers())
	admin, err := sarama.NewClusterAdminFromClient(client) // not closed: that would close client
	if err != nil {
		return "", err
	}
	if err := admin.CreateTopic(c.topic, &sarama.TopicDetail{NumPartitions: matrixPartitions, ReplicationFactor: 1}, false); err != nil {
		return "", fmt.Errorf("create topic: %w", err)
	}
	producer, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		return "", err
	}
	var msgs []*sarama.ProducerMessage
	for i, v := range matrixValues() {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: c.topic, Partition: int32(i % matrixPartitions), Value: sarama.StringEncoder(v)})
	}
	err = producer.SendMessages(msgs)
	if cerr := producer.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("produce: %w", err)
	}

	var got []string
	if c.group == "" {
		got, err = saramaConsumePartitions(ctx, client, c.topic)
	} else {
		got, err = saramaConsumeGroup(ctx, client, c.topic, c.group)
	}
	if err != nil {
		return "", err
	}
	if err := checkConsumed(got); err != nil {
		return "", err
	}
	version, _ := goModule("github.com/IBM/sarama")()
	return okLine("IBM/sarama", version, c, brokers), nil
}

func saramaConsumePartitions(ctx context.Context, client sarama.Client, topic string) ([]string, error) {
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	var got []string
	for p := range int32(matrixPartitions) {
		pc, err := consumer.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			return nil, fmt.Errorf("consume partition %d: %w", p, err)
		}
		for range matrixRecords / matrixPartitions {
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
			all := len(h.got) == matrixRecords
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
	if len(h.got) < matrixRecords {
		return nil, fmt.Errorf("consumed %d of %d records: %w", len(h.got), matrixRecords, ctx.Err())
	}
	return h.got, nil
}

func runKafkaGo(ctx context.Context, c cell) (string, error) {
	var mech kafkagosasl.Mechanism
	switch c.mech {
	case "PLAIN":
		mech = kafkagoplain.Mechanism{Username: c.user, Password: c.password}
	case "SCRAM-SHA-256", "SCRAM-SHA-512":
		algo := kafkagoscram.SHA256
		if c.mech == "SCRAM-SHA-512" {
			algo = kafkagoscram.SHA512
		}
		var err error
		if mech, err = kafkagoscram.Mechanism(algo, c.user, c.password); err != nil {
			return "", err
		}
	}
	dialer := &kafkago.Dialer{Timeout: 10 * time.Second, ClientID: "kafka-go-matrix", SASLMechanism: mech}
	// The Conn API sends Metadata v1 with no ApiVersions first.
	conn, err := dialer.DialContext(ctx, "tcp", c.bootstrap)
	if err != nil {
		return "", authError(fmt.Errorf("dial: %w", err), errors.Is(err, kafkago.SASLAuthenticationFailed))
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
	err = cc.CreateTopics(kafkago.TopicConfig{Topic: c.topic, NumPartitions: matrixPartitions, ReplicationFactor: 1})
	cc.Close()
	if err != nil {
		return "", fmt.Errorf("create topic: %w", err)
	}

	transport := &kafkago.Transport{DialTimeout: 10 * time.Second, ClientID: "kafka-go-matrix", SASL: mech}
	defer transport.CloseIdleConnections()
	w := &kafkago.Writer{
		Addr: kafkago.TCP(c.bootstrap), Topic: c.topic, Transport: transport,
		RequiredAcks: kafkago.RequireAll, BatchTimeout: 10 * time.Millisecond,
		Balancer: kafkago.BalancerFunc(func(m kafkago.Message, _ ...int) int { p, _ := strconv.Atoi(string(m.Key)); return p }),
	}
	var msgs []kafkago.Message
	for i, v := range matrixValues() {
		msgs = append(msgs, kafkago.Message{Key: []byte(strconv.Itoa(i % matrixPartitions)), Value: []byte(v)})
	}
	err = w.WriteMessages(ctx, msgs...)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("produce: %w", err)
	}

	var got []string
	if c.group == "" {
		for p := range matrixPartitions {
			r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: []string{c.bootstrap}, Topic: c.topic, Partition: p,
				Dialer: dialer, MaxWait: 500 * time.Millisecond})
			for range matrixRecords / matrixPartitions {
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
		r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: []string{c.bootstrap}, GroupID: c.group, Topic: c.topic,
			Dialer: dialer, StartOffset: kafkago.FirstOffset, MaxWait: 500 * time.Millisecond,
			HeartbeatInterval: time.Second, SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second,
			JoinGroupBackoff: 500 * time.Millisecond})
		var fetched []kafkago.Message
		for len(fetched) < matrixRecords {
			m, err := r.FetchMessage(ctx)
			if err != nil {
				r.Close()
				return "", fmt.Errorf("consumed %d of %d records: %w", len(fetched), matrixRecords, err)
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
	version, _ := goModule("github.com/segmentio/kafka-go")()
	return okLine("segmentio/kafka-go", version, c, len(brokers)), nil
}

// runKcat runs kcat for each step. kcat cannot create topics: producing
// to a new one creates it (auto.create.topics.enable, with the cluster's
// num.partitions).
func runKcat(ctx context.Context, c cell) (string, error) {
	version, _ := probeKcat()
	base := []string{"-b", c.bootstrap, "-m", "5"}
	if c.mech != noSASL {
		base = append(base, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms="+c.mech,
			"-X", "sasl.username="+c.user, "-X", "sasl.password="+c.password)
	}
	kcat := func(stdin string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "kcat", append(slices.Clone(base), args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		cmd.WaitDelay = 5 * time.Second
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return "", authError(fmt.Errorf("kcat %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String())),
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
	values := matrixValues()
	for p := range matrixPartitions {
		var lines []string
		for i := p; i < len(values); i += matrixPartitions {
			lines = append(lines, values[i])
		}
		if _, err := kcat(strings.Join(lines, "\n")+"\n", "-P", "-t", c.topic, "-p", strconv.Itoa(p)); err != nil {
			return "", err
		}
	}
	var out string
	if c.group == "" {
		out, err = kcat("", "-C", "-t", c.topic, "-o", "beginning", "-e", "-q", "-f", `%s\n`)
	} else { // librdkafka commits the offsets consumed when it leaves
		out, err = kcat("", "-G", c.group, "-X", "auto.offset.reset=earliest", "-e", "-q", "-f", `%s\n`, c.topic)
	}
	if err != nil {
		return "", err
	}
	if err := checkConsumed(strings.Fields(out)); err != nil {
		return "", err
	}
	return okLine("kcat", version, c, brokers), nil
}
