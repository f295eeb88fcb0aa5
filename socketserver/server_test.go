package socketserver_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

func withAPIs(c *socketserver.Config) { c.APIs = allAPIs() }

func TestApiVersionsAndKgo(t *testing.T) {
	srv := socketservertest.NewServer(t, nil, withAPIs, echoMetadata)

	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1.0"
	send(t, c, req, 7)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	readResponse(t, c, resp, 7)
	assert.Equal(t, int16(0), resp.ErrorCode)
	assert.Greater(t, len(resp.ApiKeys), 50)

	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr("PLAINTEXT").String()))
	require.NoError(t, err)
	defer cl.Close()
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(context.Background(), cl)
	require.NoError(t, err)
}
