package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/oauth"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/examples/internal/clientmatrix"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security/sasl/oauthbearer/oauthbearertest"
)

// The OAUTHBEARER checks of the example broker, apart from the client
// matrix: each client stack that speaks OAUTHBEARER authenticates on a
// listener that validates signed tokens against a JWKS file (Kafka's
// OAuthBearerValidatorCallbackHandler) and on one that takes unsigned
// tokens (Kafka's default, the unsecured validator), reads metadata and
// produces oauthRecords records; and each is refused on the first with a
// token the broker must not accept. The scripts of the non-Go clients are
// examples/internal/clientmatrix's testdata/clients/oauth_*, which take
// BOOTSTRAP TOKEN TOPIC.

const (
	oauthRecords  = 3
	oauthAudience = "kafka"
	oauthIssuer   = "https://idp.example"
	// oauthUnsecure prefixes the principal of a client that writes its
	// own unsigned token (librdkafka's enable.sasl.oauthbearer.unsecure.jwt).
	oauthUnsecure = "unsecure:"
)

// oauthSettings are the broker's settings: SIGNED and UNSIGNED speak
// SASL_PLAINTEXT with OAUTHBEARER alone, INTERNAL is PLAINTEXT for
// replication and the test's verifier. Everything OAUTHBEARER needs is
// set with the listener prefixes, as Kafka reads it.
func oauthSettings(jwksURL string) []string {
	return []string{
		"listeners=SIGNED://127.0.0.1:0,UNSIGNED://127.0.0.1:0,INTERNAL://127.0.0.1:0",
		"listener.security.protocol.map=SIGNED:SASL_PLAINTEXT,UNSIGNED:SASL_PLAINTEXT,INTERNAL:PLAINTEXT",
		"inter.broker.listener.name=INTERNAL",
		"listener.name.signed.sasl.enabled.mechanisms=OAUTHBEARER",
		"listener.name.signed.oauthbearer.sasl.jaas.config=" + config.OAuthBearerLoginModule + " required;",
		"listener.name.signed.oauthbearer.sasl.server.callback.handler.class=" + config.OAuthBearerValidatorCallbackHandler,
		"listener.name.signed.oauthbearer.sasl.oauthbearer.jwks.endpoint.url=" + jwksURL,
		"listener.name.signed.oauthbearer.sasl.oauthbearer.expected.audience=" + oauthAudience,
		"listener.name.signed.oauthbearer.sasl.oauthbearer.expected.issuer=" + oauthIssuer,
		"listener.name.unsigned.sasl.enabled.mechanisms=OAUTHBEARER",
		"listener.name.unsigned.oauthbearer.sasl.jaas.config=" + config.OAuthBearerLoginModule + ` required unsecuredLoginStringClaim_sub="admin";`,
	}
}

// oauthClient is a client stack's OAUTHBEARER check.
type oauthClient struct {
	name, install string
	probe         func() (version, missing string)
	// signed: the client sends a token it is given; ownUnsigned: it writes
	// its own unsigned token (a token "unsecure:<principal>" asks for one).
	signed, ownUnsigned bool
	run                 func(ctx context.Context, bootstrap, token, topic string) (string, error)
}

var oauthClients = []oauthClient{
	{name: "franz-go kgo", install: "go.mod", probe: clientmatrix.GoModule("github.com/twmb/franz-go"), signed: true, run: runKgoOAuth},
	{name: "IBM/sarama", install: "go.mod", probe: clientmatrix.GoModule("github.com/IBM/sarama"), signed: true, run: runSaramaOAuth},
	{name: "kcat", install: "apt-get install kcat", probe: clientmatrix.ProbeKcat, ownUnsigned: true, run: runKcatOAuth},
	{name: "confluent-kafka", install: "apt-get install python3-confluent-kafka", signed: true, ownUnsigned: true,
		probe: clientmatrix.ProbePython("confluent_kafka", "print(confluent_kafka.version()[0] + ' (librdkafka ' + confluent_kafka.libversion()[0] + ')')"),
		run:   oauthScript("confluent-kafka", clientmatrix.DebianPython, "oauth_confluent.py")},
	{name: "kafka-python", install: "apt-get install python3-kafka", signed: true,
		probe: clientmatrix.ProbePython("kafka", "print(kafka.__version__)"), run: oauthScript("kafka-python", clientmatrix.DebianPython, "oauth_kafka_python.py")},
	{name: "kafkajs", install: clientmatrix.NodeInstall, signed: true, probe: clientmatrix.ProbeNode("kafkajs"), run: oauthScript("kafkajs", "node", "oauth_kafkajs.js")},
	{name: "platformatic-kafka", install: clientmatrix.NodeInstall, signed: true, probe: clientmatrix.ProbeNode("@platformatic/kafka"),
		run: oauthScript("platformatic-kafka", "node", "oauth_platformatic.mjs")},
}

func oauthScript(name, program, script string) func(context.Context, string, string, string) (string, error) {
	return func(ctx context.Context, bootstrap, token, topic string) (string, error) {
		dir, err := clientmatrix.Dir()
		if err != nil {
			return "", err
		}
		return clientmatrix.RunProgram(ctx, name, program, filepath.Join(dir, script), bootstrap, token, topic)
	}
}

// TestOAuthBearerClients runs every client stack that speaks OAUTHBEARER
// against the example broker: with a token signed by a key of the JWKS
// file the test wrote (SIGNED), and with an unsigned token (UNSIGNED),
// kcat's and confluent-kafka's written by librdkafka itself
// (enable.sasl.oauthbearer.unsecure.jwt=true, sasl.oauthbearer.config=
// principal=...). Each produces to a topic of its own; the test then checks
// with kgo on INTERNAL that the records arrived, and in the broker's
// connection registry that the client authenticated as User:<the token's
// principal> with OAUTHBEARER and a session that ends. On SIGNED each
// client is also refused, one at a time, with an expired token (kcat: its
// own unsigned one): the client fails well before its timeout, and the
// broker closed a connection for failed authentication. kafka-go has no
// OAUTHBEARER. The results are logged as the table of
// docs/client-compatibility.md.
func TestOAuthBearerClients(t *testing.T) {
	is := oauthbearertest.NewIssuer(t, oauthIssuer)
	is.AddKey(t, "k1", "RS256")
	c := startClusterWith(t, 1, config.Properties{}, oauthSettings(is.WriteJWKS(t))...)
	verifier := newClient(t, addr(t, c, 0, "INTERNAL"))
	claims := func(sub string, ttl time.Duration) map[string]any {
		cl := is.Claims(sub, ttl)
		cl["aud"] = oauthAudience
		return cl
	}
	expired := is.Sign(t, "k1", merge(claims("late", time.Hour), map[string]any{
		"iat": time.Now().Add(-2 * time.Hour).Unix(), "exp": time.Now().Add(-time.Hour).Unix()}))

	type cell struct {
		client           oauthClient
		column, listener string
		principal, token string
		refused          bool
	}
	var cells []cell
	outcomes := map[string]string{} // client/column
	var mu sync.Mutex
	for _, client := range oauthClients {
		if _, ok := clientmatrix.Require(t, client.name, client.install, client.probe); !ok {
			continue
		}
		slug := strings.NewReplacer(" ", "-", "/", "-").Replace(client.name)
		if client.signed {
			p := slug + "-jwks"
			cells = append(cells, cell{client: client, column: "JWKS", listener: "SIGNED", principal: p, token: is.Sign(t, "k1", claims(p, time.Hour))},
				cell{client: client, column: "refused", listener: "SIGNED", refused: true, token: expired})
		}
		p := slug + "-unsecured"
		unsigned := cell{client: client, column: "unsecured", listener: "UNSIGNED", principal: p,
			token: oauthbearertest.UnsecuredToken(map[string]any{"sub": p, "exp": float64(time.Now().Add(time.Hour).UnixMilli()) / 1000})}
		if client.ownUnsigned {
			unsigned.token = oauthUnsecure + p
			if !client.signed {
				cells = append(cells, cell{client: client, column: "refused", listener: "SIGNED", refused: true, token: oauthUnsecure + "mallory"})
			}
		}
		cells = append(cells, unsigned)
	}

	// Successes, three at a time.
	sem := make(chan struct{}, 3)
	t.Run("accepted", func(t *testing.T) {
		for _, cl := range cells {
			if cl.refused {
				continue
			}
			t.Run(cl.client.name+"/"+cl.column, func(t *testing.T) {
				t.Parallel()
				sem <- struct{}{}
				defer func() { <-sem }()
				slug := strings.NewReplacer(" ", "-", "/", "-").Replace(cl.client.name)
				topic := "oauth-" + slug + "-" + cl.column
				createTopic(t, dialRaw(t, addr(t, c, 0, "INTERNAL")), topic, 1)
				ctx, cancel := context.WithTimeout(context.Background(), matrixCellTimeout)
				defer cancel()
				out, err := cl.client.run(ctx, addr(t, c, 0, protocolmap.ListenerName(cl.listener)), cl.token, topic)
				require.NoError(t, err)
				require.Contains(t, out, "OK ")
				requireHighWatermark(t, verifier, topic, oauthRecords)
				requireOAuthConnection(t, c, cl.listener, cl.principal)
				t.Logf("%s", strings.TrimSpace(out))
				mu.Lock()
				outcomes[cl.client.name+"/"+cl.column] = "✓"
				mu.Unlock()
			})
		}
	})
	// Refusals, one at a time, so that the broker's failed authentications
	// can be counted.
	signed := "SIGNED"
	f := connregistry.Filter{Listener: &signed}
	require.NoError(t, f.Validate())
	failedAuth := func() int {
		n := 0
		for _, conn := range c.brokers[0].srv.Registry().Closed(f) {
			if conn.CloseReason == connregistry.CloseAuthenticationFailed {
				n++
			}
		}
		return n
	}
	t.Run("refused", func(t *testing.T) {
		for _, cl := range cells {
			if !cl.refused {
				continue
			}
			t.Run(cl.client.name, func(t *testing.T) {
				before := failedAuth()
				ctx, cancel := context.WithTimeout(context.Background(), wrongPasswordBound)
				defer cancel()
				start := time.Now()
				out, err := cl.client.run(ctx, addr(t, c, 0, protocolmap.ListenerName(cl.listener)), cl.token, "oauth-refused")
				require.Error(t, err, "the broker accepted %s's token: %s", cl.client.name, out)
				require.NoError(t, ctx.Err(), "%s gave up only at its timeout", cl.client.name)
				require.Less(t, time.Since(start), wrongPasswordBound)
				require.Eventually(t, func() bool { return failedAuth() > before }, 5*time.Second, 10*time.Millisecond,
					"the broker closed no connection for failed authentication")
				outcome := "refused"
				if !strings.Contains(err.Error(), clientmatrix.AuthFailed) {
					outcome = "refused¹" // the client does not call it an authentication error
				}
				t.Logf("%s: %s: %v", cl.client.name, outcome, err)
				mu.Lock()
				outcomes[cl.client.name+"/refused"] = outcome
				mu.Unlock()
			})
		}
	})

	lines := []string{"| client | JWKS (signed token) | unsecured (unsigned token) | expired token |", "|---|---|---|---|"}
	for _, client := range oauthClients {
		row := []string{client.name}
		for _, column := range []string{"JWKS", "unsecured", "refused"} {
			outcome, ok := outcomes[client.name+"/"+column]
			if !ok {
				outcome = "–"
			}
			row = append(row, outcome)
		}
		lines = append(lines, "| "+strings.Join(row, " | ")+" |")
	}
	t.Logf("OAUTHBEARER clients:\n%s", strings.Join(lines, "\n"))
}

func merge(a, b map[string]any) map[string]any {
	for k, v := range b {
		a[k] = v
	}
	return a
}

// requireHighWatermark checks, with ListOffsets, that partition 0 of topic
// holds n records.
func requireHighWatermark(t *testing.T, cl *kgo.Client, topic string, n int64) {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = 0, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	require.NoError(t, err)
	require.Len(t, resp.Topics, 1)
	require.NoError(t, kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
	assert.Equal(t, n, resp.Topics[0].Partitions[0].Offset, "high watermark of %s", topic)
}

// requireOAuthConnection checks the broker's registry (open and recently
// closed connections) for a connection of principal on the listener that
// authenticated with OAUTHBEARER and has a session expiry.
func requireOAuthConnection(t *testing.T, c *cluster, listenerName, principal string) {
	t.Helper()
	p := "User:" + principal
	f := connregistry.Filter{Principal: &p, Listener: &listenerName}
	require.NoError(t, f.Validate())
	reg := c.brokers[0].srv.Registry()
	conns := append(reg.Snapshot(f), reg.Closed(f)...)
	require.NotEmpty(t, conns, "no connection of %s on %s", p, listenerName)
	for _, conn := range conns {
		assert.Equal(t, "OAUTHBEARER", conn.SASLMechanism)
		assert.False(t, conn.AuthenticatedAt.IsZero())
		assert.True(t, conn.SessionExpiry.After(conn.AuthenticatedAt), "the session ends with the token")
	}
}

func runKgoOAuth(ctx context.Context, bootstrap, token, topic string) (string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ClientID("kgo-oauth"),
		kgo.SASL(oauth.Auth{Token: token}.AsMechanism()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		// kgo answers the error challenge with 0x01 and gets
		// SASL_AUTHENTICATION_FAILED.
		return "", clientmatrix.AuthError(fmt.Errorf("metadata: %w", err), errors.Is(err, kerr.SaslAuthenticationFailed))
	}
	var records []*kgo.Record
	for i := range oauthRecords {
		records = append(records, &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "oauth-%d", i)})
	}
	if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
		return "", fmt.Errorf("produce: %w", err)
	}
	version, _ := clientmatrix.GoModule("github.com/twmb/franz-go")()
	return fmt.Sprintf("OK franz-go kgo %s OAUTHBEARER brokers=%d produced %d records", version, len(meta.Brokers), oauthRecords), nil
}

// saramaToken is sarama's AccessTokenProvider of a fixed token.
type saramaToken string

func (s saramaToken) Token() (*sarama.AccessToken, error) {
	return &sarama.AccessToken{Token: string(s)}, nil
}

func runSaramaOAuth(ctx context.Context, bootstrap, token, topic string) (string, error) {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.ClientID = "sarama-oauth"
	cfg.Net.DialTimeout = 10 * time.Second
	cfg.Metadata.Retry.Max = 0
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Net.SASL.Enable = true
	cfg.Net.SASL.Mechanism = sarama.SASLTypeOAuth
	cfg.Net.SASL.TokenProvider = saramaToken(token)
	client, err := sarama.NewClient([]string{bootstrap}, cfg)
	if err != nil {
		return "", clientmatrix.AuthError(fmt.Errorf("connect: %w", err),
			errors.Is(err, sarama.ErrSASLAuthenticationFailed) || strings.Contains(err.Error(), sarama.ErrSASLAuthenticationFailed.Error()))
	}
	defer client.Close()
	brokers := len(client.Brokers())
	producer, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		return "", err
	}
	var msgs []*sarama.ProducerMessage
	for i := range oauthRecords {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Partition: 0, Value: sarama.StringEncoder(fmt.Sprintf("oauth-%d", i))})
	}
	err = producer.SendMessages(msgs)
	if cerr := producer.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("produce: %w", err)
	}
	version, _ := clientmatrix.GoModule("github.com/IBM/sarama")()
	return fmt.Sprintf("OK IBM/sarama %s OAUTHBEARER brokers=%d produced %d records", version, brokers, oauthRecords), nil
}

// runKcatOAuth runs kcat with librdkafka's own unsigned token for the
// principal of token ("unsecure:<principal>"): kcat can pass no other.
func runKcatOAuth(ctx context.Context, bootstrap, token, topic string) (string, error) {
	principal, ok := strings.CutPrefix(token, oauthUnsecure)
	if !ok {
		return "", errors.New("kcat writes its own unsigned token only")
	}
	version, _ := clientmatrix.ProbeKcat()
	base := []string{"-b", bootstrap, "-m", "5", "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=OAUTHBEARER",
		"-X", "enable.sasl.oauthbearer.unsecure.jwt=true", "-X", "sasl.oauthbearer.config=principal=" + principal}
	kcat := func(stdin string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "kcat", append(slices.Clone(base), args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		cmd.WaitDelay = 5 * time.Second
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return "", clientmatrix.AuthError(fmt.Errorf("kcat %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String())),
				strings.Contains(stderr.String(), "SASL authentication error") || strings.Contains(stderr.String(), "invalid_token"))
		}
		return stdout.String(), nil
	}
	listing, err := kcat("", "-L")
	if err != nil {
		return "", err
	}
	if !strings.Contains(listing, " 1 brokers:") {
		return "", fmt.Errorf("kcat -L:\n%s", listing)
	}
	var lines []string
	for i := range oauthRecords {
		lines = append(lines, fmt.Sprintf("oauth-%d", i))
	}
	if _, err := kcat(strings.Join(lines, "\n")+"\n", "-P", "-t", topic, "-p", "0"); err != nil {
		return "", err
	}
	return fmt.Sprintf("OK kcat %s OAUTHBEARER brokers=1 produced %d records", version, oauthRecords), nil
}

// -check validates the OAUTHBEARER keys as serving would, naming the key
// at fault; a valid configuration prints the listeners.
func TestOAuthBearerCheck(t *testing.T) {
	is := oauthbearertest.NewIssuer(t, oauthIssuer)
	is.AddKey(t, "k1", "ES256")
	settings := oauthSettings(is.WriteJWKS(t))
	args := func(extra ...string) []string {
		var a []string
		for _, s := range append(slices.Clone(settings), extra...) {
			a = append(a, "-set", s)
		}
		return append([]string{"-check"}, a...)
	}
	code, stdout, stderr := runBroker(t, args()...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "SIGNED")
	for _, tc := range []struct{ set, key, rule string }{
		{"listener.name.signed.oauthbearer.sasl.oauthbearer.jwks.endpoint.url=file:///nowhere/jwks.json",
			"listener.name.signed.oauthbearer.sasl.oauthbearer.jwks.endpoint.url", "doesn't exist"},
		{"listener.name.unsigned.oauthbearer.sasl.jaas.config=" + config.PlainLoginModule + ` required user_alice="secret-pw";`,
			"listener.name.unsigned.oauthbearer.sasl.jaas.config", "is not " + config.OAuthBearerLoginModule},
		{"listener.name.signed.oauthbearer.sasl.server.callback.handler.class=com.example.Introspection",
			"listener.name.signed.oauthbearer.sasl.server.callback.handler.class", "implements only Kafka's"},
		{"sasl.oauthbearer.clock.skew.seconds=-5", "sasl.oauthbearer.clock.skew.seconds", "at least 0"},
	} {
		code, _, stderr := runBroker(t, args(tc.set)...)
		assert.Equal(t, 1, code, tc.set)
		assert.Contains(t, stderr, "configuration "+tc.key+":", tc.set)
		assert.Contains(t, stderr, tc.rule, tc.set)
		assert.NotContains(t, stderr, "secret-pw")
	}
}

// Serving, the broker logs at start that UNSIGNED accepts unsigned tokens,
// and reads SIGNED's JWKS then (Kafka's broker reads it when it starts).
func TestOAuthBearerServeWarnsAndReadsKeys(t *testing.T) {
	is := oauthbearertest.NewIssuer(t, oauthIssuer)
	is.AddKey(t, "k1", "ES256")
	props, err := config.Properties{}.With(oauthSettings(is.WriteJWKS(t))...)
	require.NoError(t, err)
	var logs syncBuffer
	c, err := startCluster(context.Background(), props, 1, slog.New(slog.NewTextHandler(&logs, nil)), nil)
	require.NoError(t, err)
	defer c.Close()
	out := logs.String()
	assert.Regexp(t, `level=WARN msg="OAUTHBEARER accepts UNSIGNED tokens[^"]*" broker=0 listener=UNSIGNED`, out)
	assert.Regexp(t, `msg="OAUTHBEARER: JWKS read; refreshing it in the background" broker=0 listener=SIGNED .*keys=\[k1\]`, out)
	assert.NotRegexp(t, `UNSIGNED tokens[^\n]*listener=SIGNED`, out, "SIGNED validates its tokens")
}

// syncBuffer is a log sink safe for the broker's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
