package socketserver_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/security"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// A listener that enables SCRAM alone, its users under Kafka's own SCRAM
// JAAS key (ScramLoginModule), serves a kgo client that logs in with
// SCRAM-SHA-512; a user of the broker's own identity (username,
// password) does not log in.
func TestSCRAMOnlyListenerFromKafkasJAASKey(t *testing.T) {
	props := config.Properties{
		"listeners":                      "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
		"listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT",
		"sasl.enabled.mechanisms":        "SCRAM-SHA-512",
		"listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": config.ScramLoginModule +
			` required username="admin" password="admin-secret" user_alice="alice-secret";`,
	}
	lc, err := config.Listeners(props)
	require.NoError(t, err)
	lists, warnings, err := config.JAASUsers(props, lc)
	require.NoError(t, err)
	require.Empty(t, warnings)
	users, err := security.NewJAASUsers(lists)
	require.NoError(t, err)
	srv := socketservertest.NewServer(t, props, func(c *socketserver.Config) {
		c.APIs = []socketserver.API{socketserver.KmsgAPI(kmsg.Metadata, 0, 13)}
		for name, store := range users.Stores() {
			c.PerListener[name].Credentials = store
		}
		c.FailedAuthenticationDelay = -1
	}, socketserver.HandlerFunc(func(r *socketserver.Request) {
		_ = r.Respond(r.Body.(*kmsg.MetadataRequest).ResponseKind())
	}))
	addr := srv.Addr("SASL_PLAINTEXT").String()
	socketservertest.ConnectKgo(t, addr, socketservertest.KgoSASL("SCRAM-SHA-512", "alice", "alice-secret"))

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), socketservertest.KgoSASL("SCRAM-SHA-512", "admin", "admin-secret"), kgo.RequestRetries(0))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err = cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrMetadataRequest())
	require.ErrorContains(t, err, "SASL_AUTHENTICATION_FAILED")
}
