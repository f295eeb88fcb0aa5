package security

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
)

// DefaultTLSWatchInterval is how often a [TLSWatcher] reads its files
// when its Interval is not set.
const DefaultTLSWatchInterval = 10 * time.Second

// TLSWatcher reloads the TLS configurations of listeners when the PEM
// files their settings name (ssl.keystore.location and
// ssl.truststore.location, with the listener prefix or not) change on
// disk, as when a certificate manager renews them or Kubernetes updates a
// mounted secret. It reads the files every Interval and compares their
// content, not their modification times or file system events: a mounted
// secret changes by swapping a symbolic link to a new directory, which a
// watch of the file itself does not see, and the content is what matters.
// When a listener's files differ from the last reading, it builds the
// listener's configuration again with [TLSConfig] and hands it to apply
// (typically socketserver.Server.ReloadTLS, which checks it and serves it
// to new connections).
//
// Files that do not load (a file half written, a key that does not match
// the certificate) or a configuration that apply refuses (a certificate
// for another subject) are logged and leave the configuration in force;
// the watcher tries again when the files change again. Writers should
// replace the files whole (a rename, as Kubernetes does), so that no
// reading sees half of them. Inline PEM settings (ssl.keystore.key,
// ssl.truststore.certificates) do not change on disk: the host reloads
// them from its properties.
//
// Create it with [NewTLSWatcher], set Interval and Logger, and call Run,
// which returns when its context ends: the watcher has no goroutine of its
// own.
type TLSWatcher struct {
	// Interval is how often the files are read; zero or negative means
	// DefaultTLSWatchInterval.
	Interval time.Duration
	// Logger receives a line for every reload and every failed one; nil
	// discards them.
	Logger *slog.Logger

	apply   func(protocolmap.ListenerName, *tls.Config) error
	running atomic.Bool

	mu  sync.Mutex    // held by a reading and by SetListeners
	set *listener.Set // the listeners and properties to read
	gen uint64        // counts SetListeners calls
}

// NewTLSWatcher returns a watcher of the TLS listeners of set (those that
// speak SSL or SASL_SSL) that hands each reloaded configuration to apply.
func NewTLSWatcher(set *listener.Set, apply func(name protocolmap.ListenerName, cfg *tls.Config) error) *TLSWatcher {
	return &TLSWatcher{set: set, apply: apply}
}

// SetListeners replaces the listeners and properties the watcher reads,
// when the host has read its properties again: the files they name may be
// others. It waits for a reading in progress to end, so that once it
// returns nothing read under the old listeners is applied: a host calls
// it before it applies the new reading itself (Server.ReloadTLSFrom),
// which the watcher then cannot undo. At its next reading the watcher
// loads and applies every listener's files, changed or not, so that no
// change between the host's reading and its own is missed. apply must not
// call SetListeners.
func (w *TLSWatcher) SetListeners(set *listener.Set) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.set = set
	w.gen++
}

// errWatcherRunning is Run's error when it is already running.
var errWatcherRunning = errors.New("security: TLSWatcher.Run is already running")

// Run reads the files at once, loading and applying every listener's
// configuration (the files may have changed since the host read them),
// then every Interval, applying the listeners whose files changed, until
// ctx ends; it then returns ctx's error. It returns an error at once if
// the watcher has no listeners or no apply function, or is running
// already.
func (w *TLSWatcher) Run(ctx context.Context) error {
	if w.apply == nil || w.set == nil {
		return errors.New("security: TLSWatcher needs listeners and an apply function (NewTLSWatcher)")
	}
	if !w.running.CompareAndSwap(false, true) {
		return errWatcherRunning
	}
	defer w.running.Store(false)
	log := w.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	interval := w.Interval
	if interval <= 0 {
		interval = DefaultTLSWatchInterval
	}
	seen := map[protocolmap.ListenerName][sha256.Size]byte{}
	gen := uint64(0)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		w.mu.Lock() // held while reading and applying: see SetListeners
		if w.gen != gen {
			gen = w.gen
			clear(seen)
		}
		w.poll(w.set, seen, log)
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
	}
}

// poll reads each TLS listener's files and applies those that changed
// since seen, which it updates.
func (w *TLSWatcher) poll(set *listener.Set, seen map[protocolmap.ListenerName][sha256.Size]byte, log *slog.Logger) {
	c := view(set)
	for _, l := range set.All {
		if !l.SecurityProtocol.UsesTLS() {
			continue
		}
		files := c.tlsFiles(l.Name)
		if len(files) == 0 {
			continue
		}
		sum := fingerprint(files)
		before, known := seen[l.Name]
		if known && before == sum {
			continue
		}
		seen[l.Name] = sum
		cfg, err := TLSConfig(set, l.Name)
		if err != nil {
			log.Error("TLS files do not load; the configuration in force stays", "listener", l.Name, "files", files, "err", err)
			continue
		}
		if err := w.apply(l.Name, cfg); err != nil {
			log.Error("TLS reload refused; the configuration in force stays", "listener", l.Name, "files", files, "err", err)
			continue
		}
		if known {
			log.Info("TLS files changed; reloaded", "listener", l.Name, "files", files)
		} else {
			log.Debug("TLS files read; applied", "listener", l.Name, "files", files)
		}
	}
}

// tlsFiles returns the files a listener's TLS settings read: its key
// store and trust store locations and each listed server name's key store
// location, when set.
func (c config) tlsFiles(name protocolmap.ListenerName) []string {
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

// fingerprint hashes the names and content of files, in order, each
// length-prefixed; a file that does not read counts by its error, so that
// its return is a change.
func fingerprint(files []string) [sha256.Size]byte {
	h := sha256.New()
	field := func(b []byte) {
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(b))))
		h.Write(b)
	}
	for _, f := range files {
		field([]byte(f))
		data, err := os.ReadFile(f)
		if err != nil {
			field(nil)
			field([]byte(err.Error()))
			continue
		}
		field([]byte{1})
		field(data)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}
