package socketserver_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

var controlPlaneProps = config.Properties{
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
		if r.Conn.Plane == protocolmap.DataPlane {
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
	require.Eventually(t, func() bool { return srv.Stats().RequestQueueSize[protocolmap.DataPlane] == 1 },
		10*time.Second, time.Millisecond, "the data queue never filled")
	dataReq := recv(t, dataSeen)
	_, _, dataProcessor, _ := parseConnID(t, dataReq.Conn.ID)
	assert.Contains(t, []int{1, 2, 3}, dataProcessor, "CLIENT has the three processors after the control plane's")

	for i := range 3 {
		c := socketservertest.Dial(t, srv, "CONTROLLER")
		start := time.Now()
		metadataRoundTrip(t, c, 1, int32(i))
		assert.Less(t, time.Since(start), time.Second, "control-plane request %d waited", i)
		r := recv(t, ctrlSeen)
		assert.Equal(t, protocolmap.ControlPlane, r.Conn.Plane)
		assert.Equal(t, protocolmap.ListenerName("CONTROLLER"), r.Conn.Listener)
		_, _, processor, index := parseConnID(t, r.Conn.ID)
		assert.Equal(t, 0, processor, "the control plane's single processor comes first")
		assert.Equal(t, i, index)
	}
	st := srv.Stats()
	assert.Equal(t, 1, st.RequestQueueSize[protocolmap.DataPlane])
	assert.Equal(t, 0, st.RequestQueueSize[protocolmap.ControlPlane])
	assert.Len(t, st.ProcessorBusy, 4, "3 CLIENT processors and 1 CONTROLLER processor")
	assert.Empty(t, dataSeen, "a second data request reached the blocked handler")
	assert.NotNil(t, socketserver.Requests(srv, protocolmap.ControlPlane))
}

// Without control.plane.listener.name there is no control plane.
func TestNoControlPlane(t *testing.T) {
	srv := socketservertest.NewServer(t, nil, withAPIs, echoMetadata)
	assert.Nil(t, socketserver.Requests(srv, protocolmap.ControlPlane))
	assert.NotNil(t, socketserver.Requests(srv, protocolmap.DataPlane))
	assert.Nil(t, socketserver.Requests(srv, protocolmap.Plane(7)))
	_, ok := srv.Stats().RequestQueueSize[protocolmap.ControlPlane]
	assert.False(t, ok)
	assert.Error(t, srv.Serve(context.Background(), protocolmap.ControlPlane, echoMetadata))
}

// Processor ids are numbered across the server as Kafka numbers them
// (SocketServer.nextProcessorId; SocketServer creates the control plane's
// acceptor and processor before the data plane's): the control plane's
// single processor is 0 wherever its listener stands in listeners, then
// each data-plane listener's processors follow in the order of listeners.
// The id is the third field of every connection id.
func TestProcessorIDsControlPlaneFirst(t *testing.T) {
	for _, tc := range []struct {
		name      string
		listeners string
		want      map[string][]int // listener: its processors' ids
	}{
		{"control plane in the middle", "CLIENT://127.0.0.1:0,CONTROLLER://127.0.0.1:0,INTERNAL://127.0.0.1:0",
			map[string][]int{"CONTROLLER": {0}, "CLIENT": {1, 2}, "INTERNAL": {3, 4, 5}}},
		{"control plane last", "CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
			map[string][]int{"CONTROLLER": {0}, "CLIENT": {1, 2}, "INTERNAL": {3, 4, 5}}},
		{"no control plane", "CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
			map[string][]int{"CLIENT": {0, 1}, "INTERNAL": {2, 3, 4}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			props := config.Properties{
				"listeners":                                  tc.listeners,
				"listener.security.protocol.map":             "CLIENT:PLAINTEXT,CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT",
				"inter.broker.listener.name":                 "INTERNAL",
				"listener.name.client.num.network.threads":   "2",
				"listener.name.internal.num.network.threads": "3",
			}
			if _, ok := tc.want["CONTROLLER"]; ok {
				props["control.plane.listener.name"] = "CONTROLLER"
			}
			seen := make(chan *socketserver.Request, 1)
			srv := socketservertest.NewServer(t, props, withAPIs, queueHandler(seen))
			var all []int
			for name, want := range tc.want {
				var got []int
				for i := range len(want) { // connections go round robin over the listener's processors
					c := socketservertest.Dial(t, srv, protocolmap.ListenerName(name))
					send(t, c, metadataReq(1), int32(i))
					r := recv(t, seen)
					_, _, processor, index := parseConnID(t, r.Conn.ID)
					got = append(got, processor)
					assert.Equal(t, 0, index, "each processor numbers its own connections from 0")
					require.NoError(t, respondEmpty(r))
				}
				assert.Equal(t, want, got, "processor ids of %s", name)
				all = append(all, want...)
			}
			ids := slices.Collect(maps.Keys(srv.Stats().ProcessorBusy))
			assert.ElementsMatch(t, all, ids, "Stats names the same processors")
		})
	}
}
