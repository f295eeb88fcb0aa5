package config

import (
	"crypto/tls"
	"slices"

	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
)

// TLSSources returns, for a security.TLSWatcher, the source of each TLS
// listener of set (SSL or SASL_SSL) whose settings in props name PEM
// files: the files of ssl.keystore.location and ssl.truststore.location
// (with the listener prefix or not) and of each listed server name's key
// store (kafkanet.ssl.server.name.<name>.ssl.keystore.location, see
// [TLS]), and a Load that builds the listener's configuration with [TLS].
// Inline PEM settings (ssl.keystore.key, ssl.truststore.certificates) do
// not change on disk and are not watched: the host reloads them from its
// properties. The map is empty, not nil, when no listener names a file.
func TLSSources(props Properties, set *listener.Set) map[protocolmap.ListenerName]security.TLSSource {
	c := reader{props, set}
	out := map[protocolmap.ListenerName]security.TLSSource{}
	for _, l := range set.All {
		if !l.SecurityProtocol.UsesTLS() {
			continue
		}
		files := c.tlsFiles(l.Name)
		if len(files) == 0 {
			continue
		}
		name := l.Name
		out[name] = security.TLSSource{Files: files, Load: func() (*tls.Config, error) { return TLS(props, set, name) }}
	}
	return out
}

// tlsFiles returns the files a listener's TLS settings read: its key
// store and trust store locations and each listed server name's key store
// location, when set.
func (c reader) tlsFiles(name protocolmap.ListenerName) []string {
	var out []string
	keys := []string{KeySSLKeystoreLocation, KeySSLTruststoreLocation}
	// Each listed server name's key store (kafkanet.ssl.server.names) is
	// a file of its own, rotated on its own.
	if list := c.setting(name, KeySSLServerNames); list.ok {
		for _, sn := range protocolmap.SplitList(list.value) {
			if sn != "" {
				keys = append(keys, KeySSLServerNamePrefix+sn+"."+KeySSLKeystoreLocation)
			}
		}
	}
	for _, key := range keys {
		if s := c.setting(name, key); s.ok && s.value != "" && !slices.Contains(out, s.value) {
			out = append(out, s.value)
		}
	}
	return out
}
