package socketserver_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/socketserver"
)

// KmsgAPI returns kmsg's API for a key the program names, and panics,
// naming the key and kmsg's range, on what kmsg cannot decode.
func TestKmsgAPI(t *testing.T) {
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
			api := socketserver.KmsgAPI(tc.key, tc.min, tc.max)
			require.Empty(t, tc.panics, "KmsgAPI did not panic")
			assert.Equal(t, tc.key.Int16(), api.Key)
			assert.Equal(t, [2]int16{tc.min, tc.max}, [2]int16{api.MinVersion, api.MaxVersion})
			assert.Equal(t, tc.key.Int16(), api.New().Key())
		})
	}
}

// KmsgAPI panics on a key kmsg does not know, even one chosen at run
// time: such a program checks kmsg.RequestForKey first, and a key kmsg
// knows gives the same API whether the program names it or not.
func TestKmsgAPIUnknownKey(t *testing.T) {
	unknown := kmsg.Key(kmsg.MaxKey + 1)
	require.Nil(t, kmsg.RequestForKey(unknown.Int16()), "the check a program makes first")
	assert.PanicsWithValue(t, fmt.Sprintf("socketserver: KmsgAPI: kmsg does not know API key %d", unknown), func() {
		socketserver.KmsgAPI(unknown, 0, 0)
	})
	key := kmsg.Metadata.Int16() // as a proxy learns it from upstream
	require.NotNil(t, kmsg.RequestForKey(key))
	api := socketserver.KmsgAPI(kmsg.Key(key), 0, 12)
	assert.Equal(t, socketserver.KmsgAPI(kmsg.Metadata, 0, 12).Key, api.Key)
	assert.Equal(t, key, api.New().Key())
}
