package main

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/connregistry/connadmin"
)

// A throttled connection shows when its throttle ends (to the millisecond)
// in the table and in JSON, with the time muted in all in JSON; another
// shows "-" and leaves them out.
func TestThrottledConnectionShown(t *testing.T) {
	until := time.Date(2026, 4, 27, 10, 15, 30, 250e6, time.UTC)
	results := []connadmin.BrokerResult{{NodeID: 1, Connections: []connregistry.ConnectionRecord{
		{ConnectionID: "muted", Principal: "User:a", ClientAddress: "127.0.0.1", ClientPort: 1, ListenerName: "L", SecurityProtocol: "PLAINTEXT", ConnectedSince: 1,
			ThrottledUntil: until.UnixMilli(), ThrottleTimeMs: 1500},
		{ConnectionID: "free", Principal: "User:a", ClientAddress: "127.0.0.1", ClientPort: 2, ListenerName: "L", SecurityProtocol: "PLAINTEXT", ConnectedSince: 1,
			ThrottleTimeMs: 20},
	}}}
	for _, tc := range []struct {
		name  string
		check func(t *testing.T, out string)
	}{
		{"table", func(t *testing.T, out string) {
			header, rows := table(t, out)
			assert.Equal(t, tableHeader[1:], header)
			require.Len(t, rows, 2)
			assert.Equal(t, "2026-04-27T10:15:30.250Z", rows[0]["THROTTLED-UNTIL"])
			assert.Equal(t, "-", rows[1]["THROTTLED-UNTIL"])
		}},
		{"json", func(t *testing.T, out string) {
			var got []jsonBroker
			require.NoError(t, json.Unmarshal([]byte(out), &got))
			require.Len(t, got, 1)
			require.Len(t, got[0].Connections, 2)
			assert.Equal(t, "2026-04-27T10:15:30.250Z", got[0].Connections[0].ThrottledUntil)
			assert.EqualValues(t, 1500, got[0].Connections[0].ThrottleTimeMs)
			assert.Empty(t, got[0].Connections[1].ThrottledUntil)
			assert.EqualValues(t, 20, got[0].Connections[1].ThrottleTimeMs)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if tc.name == "table" {
				require.NoError(t, printTable(&b, results, false))
			} else {
				require.NoError(t, printJSON(&b, results))
			}
			tc.check(t, b.String())
		})
	}
}
