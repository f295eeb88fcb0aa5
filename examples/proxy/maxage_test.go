package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/connregistry/connadmin"
	"github.com/kafkanet/kafkanet/examples/internal/inorder"
)

// The maximum connection age through the proxy (issue 38 §2): with
// kafkanet.connections.max.age.ms=2000 and its admin listener's own -1
// (listener.name.admin.kafkanet.connections.max.age.ms), a kgo producer,
// not idempotent (acks=all, one Produce request in flight), produces
// through the proxy for 7 s across several expiries of its connections:
// every record is acknowledged once with no error reaching the
// application, and the upstream broker's log holds each once, in order
// (an answer lost at a close would show as a record written twice). The
// proxy's registry, and its ListClientConnections on the admin listener,
// show client connections closed for their age; the admin client's
// connections, open all along, were not.
func TestProxyMaxAgeWithKgoProducer(t *testing.T) {
	up := startUpstream(t, 1)
	p := startProxy(t, up.Addr(0, "INTERNAL"), nil,
		"listeners=PLAIN://127.0.0.1:0,ADMIN://127.0.0.1:0",
		"listener.security.protocol.map=PLAIN:PLAINTEXT,ADMIN:PLAINTEXT",
		"proxy.admin.listener.name=ADMIN",
		"kafkanet.connections.max.age.ms=2000",
		"listener.name.admin.kafkanet.connections.max.age.ms=-1")
	data := p.addr(t, "PLAIN")
	admin := connadmin.New(newClient(t, p.addr(t, "ADMIN"), connadmin.VersionsOpt(connregistry.DefaultListAPIKey)), 0, 0)
	_, err := admin.List(ctxFor(t, 10*time.Second), connregistry.Filter{}, false)
	require.NoError(t, err)

	const topic = "aging-through-proxy"
	created, err := kadm.NewClient(newClient(t, data)).CreateTopic(ctxFor(t, 20*time.Second), 1, 1, nil, topic)
	require.NoError(t, err)
	require.NoError(t, created.Err)
	sent := inorder.Produce(t, newClient(t, data, inorder.ProducerOpts(topic)...), 7*time.Second)
	inorder.Read(t, topic, sent, kgo.SeedBrokers(up.Addr(0, "INTERNAL")))

	plain, adminListener := connregistry.Filter{Listener: kmsg.StringPtr("PLAIN")}, connregistry.Filter{Listener: kmsg.StringPtr("ADMIN")}
	require.NoError(t, plain.Validate())
	require.NoError(t, adminListener.Validate())
	inorder.CheckAged(t, p.srv.Registry().Closed(plain), 1800*time.Millisecond, 3)
	assert.Empty(t, p.srv.Registry().Closed(adminListener), "an admin listener connection closed, though its maximum age is -1")

	res, err := admin.List(ctxFor(t, 10*time.Second), plain, true)
	require.NoError(t, err)
	require.Len(t, res, 1, "the proxy is the admin listener's only broker")
	require.NoError(t, res[0].Err)
	listed := 0
	for _, c := range res[0].Connections {
		if c.CloseReason == string(connregistry.CloseMaxAge) {
			listed++
		}
	}
	assert.GreaterOrEqual(t, listed, 3, "ListClientConnections lists the connections closed for their age")
}
