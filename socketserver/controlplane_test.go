package socketserver_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

var controlPlaneProps = listener.Properties{
	"listeners":                      "CLIENT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
	"listener.security.protocol.map": "CLIENT:PLAINTEXT,CONTROLLER:PLAINTEXT",
	"inter.broker.listener.name":     "CLIENT",
	"control.plane.listener.name":    "CONTROLLER",
	"queued.max.requests":            "1",
	"num.io.threads":                 "1",
}

// KIP-291: the control plane has its own listener, processor, queue and
// handler, so controller requests are served while the data plane is
// saturated.
func TestControlPlaneServedWhileDataPlaneFull(t *testing.T) {
	stuck := newGate()
	defer stuck.open()
	dataSeen := make(chan *socketserver.Request, 10)
	ctrlSeen := make(chan *socketserver.Request, 10)
	h := socketserver.HandlerFunc(func(r *socketserver.Request) {
		if r.Conn.Plane == listener.DataPlane {
			dataSeen <- r
			stuck.wait()
			_ = r.CloseConnection()
			return
		}
		ctrlSeen <- r
		assert.NoError(t, respondEmpty(r))
	})
	srv := socketservertest.NewServer(t, controlPlaneProps, withAPIs, h)

	// One data request blocks the handler, one fills the queue, one waits.
	for i := range int32(3) {
		send(t, socketservertest.Dial(t, srv, "CLIENT"), metadataReq(1), i)
	}
	require.Eventually(t, func() bool { return srv.Stats().RequestQueueSize[listener.DataPlane] == 1 },
		10*time.Second, time.Millisecond, "the data queue never filled")
	dataReq := recv(t, dataSeen)
	_, _, dataProcessor, _ := parseConnID(t, dataReq.Conn.ID)
	assert.Contains(t, []int{0, 1, 2}, dataProcessor, "CLIENT has the first three processors")

	for i := range 3 {
		c := socketservertest.Dial(t, srv, "CONTROLLER")
		start := time.Now()
		metadataRoundTrip(t, c, 1, int32(i))
		assert.Less(t, time.Since(start), time.Second, "control-plane request %d waited", i)
		r := recv(t, ctrlSeen)
		assert.Equal(t, listener.ControlPlane, r.Conn.Plane)
		assert.Equal(t, protocolmap.ListenerName("CONTROLLER"), r.Conn.Listener)
		_, _, processor, index := parseConnID(t, r.Conn.ID)
		assert.Equal(t, 3, processor, "the control plane's single processor comes after CLIENT's three")
		assert.Equal(t, i, index)
	}
	st := srv.Stats()
	assert.Equal(t, 1, st.RequestQueueSize[listener.DataPlane])
	assert.Equal(t, 0, st.RequestQueueSize[listener.ControlPlane])
	assert.Len(t, st.ProcessorBusy, 4, "3 CLIENT processors and 1 CONTROLLER processor")
	assert.Empty(t, dataSeen, "a second data request reached the blocked handler")
	assert.NotNil(t, srv.Requests(listener.ControlPlane))
}

// Without control.plane.listener.name there is no control plane.
func TestNoControlPlane(t *testing.T) {
	srv := socketservertest.NewServer(t, nil, withAPIs, echoMetadata)
	assert.Nil(t, srv.Requests(listener.ControlPlane))
	assert.NotNil(t, srv.Requests(listener.DataPlane))
	assert.Nil(t, srv.Requests(listener.Plane(7)))
	_, ok := srv.Stats().RequestQueueSize[listener.ControlPlane]
	assert.False(t, ok)
	assert.Error(t, srv.Serve(context.Background(), listener.ControlPlane, 1, echoMetadata))
}
