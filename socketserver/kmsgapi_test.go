package socketserver_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/socketserver"
)

// MustKmsgAPI returns kmsg's API for a key the program names, and panics,
// naming the key and kmsg's range, on what kmsg cannot decode.
func TestMustKmsgAPI(t *testing.T) {
	newest := kmsg.NewPtrProduceRequest().MaxVersion()
	for _, tc := range []struct {
		name     string
		key      kmsg.Key
		min, max int16
		panics   string // a part of the panic's message; empty for none
	}{
		{name: "kmsg's whole range", key: kmsg.Produce, min: 0, max: newest},
		{name: "a part", key: kmsg.Produce, min: 3, max: 12},
		{name: "one version", key: kmsg.Metadata, min: 12, max: 12},
		{name: "unknown key", key: kmsg.Key(kmsg.MaxKey + 1), min: 0, max: 0, panics: "kmsg does not know API key"},
		{name: "above kmsg's newest", key: kmsg.Produce, min: 3, max: newest + 1, panics: "Produce versions 3 to"},
		{name: "negative min", key: kmsg.Produce, min: -1, max: 3, panics: "kmsg decodes versions 0 to"},
		{name: "max below min", key: kmsg.Produce, min: 5, max: 4, panics: "Produce versions 5 to 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.panics != "" {
				defer func() {
					msg, _ := recover().(string)
					assert.Contains(t, msg, tc.panics)
				}()
			}
			api := socketserver.MustKmsgAPI(tc.key, tc.min, tc.max)
			require.Empty(t, tc.panics, "MustKmsgAPI did not panic")
			assert.Equal(t, tc.key.Int16(), api.Key)
			assert.Equal(t, [2]int16{tc.min, tc.max}, [2]int16{api.MinVersion, api.MaxVersion})
			assert.Equal(t, tc.key.Int16(), api.New().Key())
		})
	}
}

// KmsgAPI, for keys chosen at run time, says false for a key kmsg does not
// know.
func TestKmsgAPIUnknownKey(t *testing.T) {
	_, ok := socketserver.KmsgAPI(kmsg.MaxKey+1, 0, 0)
	assert.False(t, ok)
	api, ok := socketserver.KmsgAPI(kmsg.Metadata.Int16(), 0, 12)
	require.True(t, ok)
	assert.Equal(t, socketserver.MustKmsgAPI(kmsg.Metadata, 0, 12).Key, api.Key)
}
