package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/examples/internal/flagdoc"
)

// proxyDoc returns docs/proxy.md, the proxy's documentation.
func proxyDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/proxy.md")
	require.NoError(t, err)
	return string(b)
}

// upstream.sasl.mechanism is PLAIN unless set, and GSSAPI, Kafka's default
// for sasl.mechanism, is refused naming the key: docs/proxy.md's entry
// for the key and go doc both say that the default is not Kafka's.
func TestUpstreamSASLMechanismDefault(t *testing.T) {
	fake := startFakeUpstream(t)
	sasl := []string{"listeners=PLAINTEXT://127.0.0.1:0", "upstream.security.protocol=SASL_PLAINTEXT",
		"upstream.sasl.username=proxy", "upstream.sasl.password=proxy-secret"}
	cfg, err := resolve("", sasl, fake.addr())
	require.NoError(t, err)
	set, err := readSettings(cfg)
	require.NoError(t, err)
	assert.Equal(t, "PLAIN", set.upstreamSec.Mechanism)
	cfg, err = resolve("", append(sasl, "upstream.sasl.mechanism=GSSAPI"), fake.addr())
	if err == nil {
		_, err = readSettings(cfg)
	}
	require.ErrorContains(t, err, "upstream.sasl.mechanism")
	assert.ErrorContains(t, err, "want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")

	row := regexp.MustCompile("(?m)^\\| `upstream\\.sasl\\.mechanism` \\|.*$").FindString(proxyDoc(t))
	require.NotEmpty(t, row, "docs/proxy.md has no entry for upstream.sasl.mechanism")
	for where, text := range map[string]string{"docs/proxy.md": row, "go doc": flagdoc.Doc(t, ".")} {
		assert.Regexp(t, `(?s)Kafka's.*sasl\.mechanism.*GSSAPI`, text, "%s does not say that the default differs from Kafka's", where)
	}
}

// docs/proxy.md names every filter that kafka-client-connections closes
// connections by, as the command lists them when --close has none.
func TestDocNamesEveryCloseFilter(t *testing.T) {
	code, _, stderr := kcc(t, "--bootstrap-server", "127.0.0.1:0", "--close") // refused before it dials
	require.Equal(t, 2, code, stderr)
	_, list, ok := strings.Cut(stderr, "--close needs a filter: ")
	require.True(t, ok, "kafka-client-connections does not list its filters: %s", stderr)
	filters := regexp.MustCompile(`--[a-z-]+`).FindAllString(list, -1)
	require.NotEmpty(t, filters, stderr)
	sentence := regexp.MustCompile("(?s)`--close` with (.*?) closes what matches").FindStringSubmatch(proxyDoc(t))
	require.NotNil(t, sentence, "docs/proxy.md does not say what --close filters by")
	for _, f := range filters {
		assert.Contains(t, sentence[1], "`"+f+"`", "docs/proxy.md leaves out a filter of --close")
	}
}
