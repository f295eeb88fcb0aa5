package main

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/kafkanet/kafkanet/config"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestBrokerPropertiesMovesPorts(t *testing.T) {
	tests := []struct {
		name           string
		props          config.Properties
		broker         int
		wantListeners  string
		wantAdvertised string // "" means the key stays unset
	}{
		{
			name:          "broker 0 keeps its ports",
			props:         config.Properties{"listeners": "PLAINTEXT://127.0.0.1:9092"},
			broker:        0,
			wantListeners: "PLAINTEXT://127.0.0.1:9092",
		},
		{
			name:          "broker 2 adds 200",
			props:         config.Properties{"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://[::1]:9093"},
			broker:        2,
			wantListeners: "PLAINTEXT://127.0.0.1:9292,SSL://[::1]:9293",
		},
		{
			name:          "port 0 stays 0",
			props:         config.Properties{"listeners": "PLAINTEXT://127.0.0.1:0,SSL://:9093"},
			broker:        1,
			wantListeners: "PLAINTEXT://127.0.0.1:0,SSL://:9193",
		},
		{
			name:          "Kafka's default listeners",
			props:         config.Properties{"broker.id": "3"},
			broker:        1,
			wantListeners: "PLAINTEXT://:9192",
		},
		{
			name: "advertised listeners move too",
			props: config.Properties{
				"listeners":                   "INSIDE://0.0.0.0:9092,OUTSIDE://0.0.0.0:9093",
				"advertised.listeners":        "INSIDE://10.0.0.5:9092,OUTSIDE://broker.example.com:19093",
				config.KeySecurityProtocolMap: "INSIDE:PLAINTEXT,OUTSIDE:PLAINTEXT",
				"inter.broker.listener.name":  "INSIDE",
			},
			broker:         1,
			wantListeners:  "INSIDE://0.0.0.0:9192,OUTSIDE://0.0.0.0:9193",
			wantAdvertised: "INSIDE://10.0.0.5:9192,OUTSIDE://broker.example.com:19193",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := readBrokerConfig(tt.props)
			require.NoError(t, err)
			props, err := brokerProperties(cfg, tt.broker)
			require.NoError(t, err)
			assert.Equal(t, tt.wantListeners, props["listeners"])
			advertised, ok := props["advertised.listeners"]
			assert.Equal(t, tt.wantAdvertised != "", ok)
			assert.Equal(t, tt.wantAdvertised, advertised)
			for k, v := range tt.props {
				if k != "listeners" && k != "advertised.listeners" {
					assert.Equal(t, v, props[k], "key %s", k)
				}
			}
			_, err = config.Listeners(props)
			require.NoError(t, err)
		})
	}
}

func TestBrokerConfigs(t *testing.T) {
	cfg, err := readBrokerConfig(config.Properties{"listeners": "PLAINTEXT://127.0.0.1:65335"})
	require.NoError(t, err)
	cfgs, err := brokerConfigs(cfg, 3)
	require.NoError(t, err)
	require.Len(t, cfgs, 3)
	assert.Same(t, cfg, cfgs[0])
	assert.Equal(t, 65435, cfgs[1].All[0].Bind.Port)
	assert.Equal(t, 65535, cfgs[2].All[0].Bind.Port)

	_, err = brokerConfigs(cfg, 4)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "broker 3 would use port 65635 for listener PLAINTEXT")
}

func TestNodeIDs(t *testing.T) {
	tests := []struct {
		name string
		sets []string
		want []int32
	}{
		{"default", nil, []int32{0, 1}},
		{"node.id", []string{"node.id=5"}, []int32{5, 6}},
		{"broker.id", []string{"broker.id=7"}, []int32{7, 8}},
		{"node.id wins", []string{"broker.id=7", "node.id=2"}, []int32{2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := startTestCluster(t, 2, tt.sets...)
			conn := dialRaw(t, addr(t, c, 1, "CLIENT"))
			createTopic(t, conn, "ids", 3)
			meta := roundTrip[*kmsg.MetadataResponse](conn, metadataRequest(12, false, "ids"))
			require.Len(t, meta.Brokers, 2)
			assert.Equal(t, tt.want, []int32{meta.Brokers[0].NodeID, meta.Brokers[1].NodeID})
			assert.Equal(t, tt.want[0], meta.ControllerID)
			var leaders []int32
			for _, p := range meta.Topics[0].Partitions {
				leaders = append(leaders, p.Leader)
			}
			assert.Equal(t, []int32{tt.want[0], tt.want[1], tt.want[0]}, leaders)
		})
	}
}

func TestSplitBatches(t *testing.T) {
	one := recordBatch("a", "b")
	two := append(recordBatch("c"), recordBatch("d", "e", "f")...)
	corrupt := func(b []byte, at int) []byte {
		b = append([]byte(nil), b...)
		b[at] ^= 0xff
		return b
	}
	tests := []struct {
		name      string
		records   []byte
		wantCount []int64
		wantErr   *kerr.Error
	}{
		{"one batch", one, []int64{2}, nil},
		{"two batches", two, []int64{1, 3}, nil},
		{"empty", nil, nil, kerr.CorruptMessage},
		{"truncated", one[:len(one)-1], nil, kerr.CorruptMessage},
		{"trailing bytes", append(append([]byte(nil), one...), 0, 0, 0), nil, kerr.CorruptMessage},
		{"bad CRC", corrupt(one, len(one)-1), nil, kerr.CorruptMessage},
		{"magic 1", corrupt(one, 16), nil, kerr.UnsupportedForMessageFormat},
		{"huge length", corrupt(one, 8), nil, kerr.CorruptMessage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			batches, err := splitBatches(tt.records)
			if tt.wantErr != nil {
				require.Error(t, err)
				assert.True(t, errors.Is(err, tt.wantErr), "error %v", err)
				assert.Equal(t, tt.wantErr.Code, errorCode(err))
				return
			}
			require.NoError(t, err)
			var counts []int64
			for _, b := range batches {
				counts = append(counts, b.next-b.base)
			}
			assert.Equal(t, tt.wantCount, counts)
		})
	}
}

// TestDetachSmall checks that a batch of at least half its frame stays a
// slice of the frame and a smaller one becomes a copy of its own, with the
// same bytes.
func TestDetachSmall(t *testing.T) {
	frame := make([]byte, 1000)
	for i := range frame {
		frame[i] = byte(i)
	}
	for _, tc := range []struct {
		name     string
		from, to int
		kept     bool
	}{
		{"the whole frame", 0, 1000, true},
		{"more than half", 100, 700, true},
		{"exactly half", 500, 1000, true},
		{"one byte short of half", 0, 499, false},
		{"a small batch", 900, 950, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := frame[tc.from:tc.to:tc.to]
			batches := []batch{{raw: raw}}
			detachSmall(batches, len(frame))
			assert.Equal(t, raw, batches[0].raw, "the bytes")
			assert.Equal(t, tc.kept, unsafe.SliceData(batches[0].raw) == unsafe.SliceData(raw), "a slice of the frame")
		})
	}
}
