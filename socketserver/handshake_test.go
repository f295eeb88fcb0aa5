package socketserver_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// The TLS handshake and the SASL exchange are bounded by two limits.
// connections.max.idle.ms bounds them as in Kafka, whose Selector expires
// a connection that has not finished authenticating like any idle one, and
// which has no other limit on them. kafkanet.handshake.timeout.ms is this
// library's addition, a defence against clients that hold connections by
// handshaking slowly: it runs from the accept, so it also ends an exchange
// that keeps making progress, which the idle clock never would.
func TestHandshakeBoundedByIdleAndHandshakeTimeout(t *testing.T) {
	pki := newTestPKI(t)
	users := newUsers(t)
	ms := func(d time.Duration) string { return strconv.Itoa(int(d / time.Millisecond)) }
	const step = 500 * time.Millisecond
	for _, tc := range []struct {
		name          string
		listener      string
		idle, timeout time.Duration
		progress      bool // the SASL client takes a step every 500 ms, within the idle limit
		want          time.Duration
	}{
		{"TLS, idle limit first", "SSL", 300 * time.Millisecond, time.Minute, false, 300 * time.Millisecond},
		{"TLS, handshake timeout first", "SSL", time.Minute, 300 * time.Millisecond, false, 300 * time.Millisecond},
		{"SASL, idle limit first", "SASL_PLAINTEXT", 300 * time.Millisecond, time.Minute, false, 300 * time.Millisecond},
		{"SASL, handshake timeout first", "SASL_PLAINTEXT", time.Minute, 300 * time.Millisecond, false, 300 * time.Millisecond},
		// Steps at 0, 500 and 1000 ms: the idle limit alone would close at
		// 1700 ms, the handshake timeout does at 1200 ms.
		{"SASL making progress, handshake timeout", "SASL_PLAINTEXT", 700 * time.Millisecond, 1200 * time.Millisecond, true, 1200 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := socketservertest.NewServer(t, merge(pki.props(""), config.Properties{
				"listeners":                      "SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
				"security.inter.broker.protocol": "SSL",
				"sasl.enabled.mechanisms":        "SCRAM-SHA-256",
				"connections.max.idle.ms":        ms(tc.idle),
				"kafkanet.handshake.timeout.ms":  ms(tc.timeout),
			}), withUsers(users), echoMetadata)
			start := time.Now() // before the server's clocks start
			c := socketservertest.Dial(t, srv, protocolmap.ListenerName(tc.listener))
			if tc.progress {
				rc := &rawClient{t: t, c: c}
				rc.roundTrip(apiVersionsReq(3, "test", "1"))
				time.Sleep(step)
				require.Equal(t, int16(0), rc.handshake(1, "SCRAM-SHA-256").ErrorCode)
				time.Sleep(step)
				first, _ := newSASLClient(t, "SCRAM-SHA-256", "alice", alicePassword)(nil)
				require.Equal(t, int16(0), rc.authenticate(1, first).ErrorCode)
			}
			readUntilClosed(t, c, 10*time.Second)
			took := time.Since(start)
			assert.GreaterOrEqual(t, took, tc.want)
			assert.Less(t, took, tc.want+450*time.Millisecond, "closed by the other limit, or late")
		})
	}
}

// kafkanet.handshake.timeout.ms, a key of this library's (Kafka bounds the
// TLS handshake and SASL exchange only by connections.max.idle.ms), defaults
// to 10 s, whether the host reads the properties or fills Config itself
// (TestHandshakeTimeoutDefault); set, it applies per listener.
// TestHandshakeTimeout and TestHandshakeBoundedByIdleAndHandshakeTimeout
// show it at work.
func TestHandshakeTimeoutKeyAndDefault(t *testing.T) {
	timeouts := func(extra config.Properties) map[protocolmap.ListenerName]time.Duration {
		t.Helper()
		props := config.Properties{
			"listeners":                      "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
			"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
			"inter.broker.listener.name":     "INTERNAL",
		}
		for k, v := range extra {
			props[k] = v
		}
		cfg, err := config.Server(props)
		require.NoError(t, err)
		srv, err := socketserver.New(cfg)
		require.NoError(t, err)
		defer srv.Close()
		return socketserver.HandshakeTimeouts(srv)
	}
	assert.Equal(t, "kafkanet.handshake.timeout.ms", config.KeyHandshakeTimeoutMs)
	assert.Equal(t, map[protocolmap.ListenerName]time.Duration{"PLAINTEXT": 10 * time.Second, "INTERNAL": 10 * time.Second}, timeouts(nil), "the default")
	assert.Equal(t, map[protocolmap.ListenerName]time.Duration{"PLAINTEXT": 2500 * time.Millisecond, "INTERNAL": 4 * time.Second}, timeouts(config.Properties{
		"kafkanet.handshake.timeout.ms":                        "2500",
		"listener.name.internal.kafkanet.handshake.timeout.ms": "4000",
	}))
}
