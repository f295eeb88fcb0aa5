package socketserver_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

func TestSASLSmoke(t *testing.T) {
	users, err := listener.NewUsers(map[string]string{"alice": "alice-secret"})
	require.NoError(t, err)
	seen := make(chan *socketserver.Request, 10)
	srv := socketservertest.NewServer(t, listener.Properties{
		"listeners":                      "SASL_PLAINTEXT://127.0.0.1:0",
		"security.inter.broker.protocol": "SASL_PLAINTEXT",
		"sasl.enabled.mechanisms":        "PLAIN,SCRAM-SHA-256",
	}, func(c *socketserver.Config) { c.APIs = allAPIs(); c.Credentials = users }, socketserver.HandlerFunc(func(r *socketserver.Request) {
		seen <- r
		_ = r.Respond(kmsg.NewPtrMetadataResponse())
	}))
	for _, mech := range []kgo.Opt{
		kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()),
		kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()),
	} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr("SASL_PLAINTEXT").String()), mech)
		require.NoError(t, err)
		_, err = kmsg.NewPtrMetadataRequest().RequestWith(context.Background(), cl)
		cl.Close()
		require.NoError(t, err)
		r := <-seen
		require.Equal(t, socketserver.Principal{Type: "User", Name: "alice"}, r.Conn.Principal)
	}
}
