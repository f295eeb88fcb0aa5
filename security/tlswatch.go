package security

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kafkanet/kafkanet/protocolmap"
)

// DefaultTLSWatchInterval is how often a [TLSWatcher] reads its files
// when its Interval is not set.
const DefaultTLSWatchInterval = 10 * time.Second

// TLSSource is one listener's TLS configuration as a [TLSWatcher] watches
// it: the files it is built from, and how to build it again. config.TLSSources
// gives each TLS listener's, from the PEM files its settings name; a host
// may build them in code, to the same effect.
type TLSSource struct {
	// Files are the files the configuration is built from, read every
	// Interval.
	Files []string
	// Load builds the listener's configuration from the files, when their
	// content has changed.
	Load func() (*tls.Config, error)
}

// TLSWatcher reloads the TLS configurations of listeners when the files
// they are built from (their [TLSSource]s: for a listener configured with
// properties, the PEM files of ssl.keystore.location and
// ssl.truststore.location, with the listener prefix or not, and of each
// server name's key store, as config.TLSSources lists them) change on
// disk, as when a certificate manager renews them or Kubernetes updates a
// mounted secret. It reads the files every Interval and compares their
// content, not their modification times or file system events: a mounted
// secret changes by swapping a symbolic link to a new directory, which a
// watch of the file itself does not see, and the content is what matters.
// When a listener's files differ from the last reading, it builds the
// listener's configuration again with its source's Load and hands it to apply
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

	mu      sync.Mutex                             // held by a reading and by SetListeners
	sources map[protocolmap.ListenerName]TLSSource // the listeners' files
	gen     uint64                                 // counts SetListeners calls
}

// NewTLSWatcher returns a watcher of the listeners of sources that hands
// each reloaded configuration to apply.
func NewTLSWatcher(sources map[protocolmap.ListenerName]TLSSource, apply func(name protocolmap.ListenerName, cfg *tls.Config) error) *TLSWatcher {
	return &TLSWatcher{sources: sources, apply: apply}
}

// SetListeners replaces the listeners' sources the watcher reads, when the
// host has read its properties again: the files they name may be
// others. It waits for a reading in progress to end, so that once it
// returns nothing read under the old listeners is applied: a host calls
// it before it applies the new reading itself (Server.ReloadTLSFrom),
// which the watcher then cannot undo. At its next reading the watcher
// loads and applies every listener's files, changed or not, so that no
// change between the host's reading and its own is missed. apply must not
// call SetListeners.
func (w *TLSWatcher) SetListeners(sources map[protocolmap.ListenerName]TLSSource) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sources = sources
	w.gen++
}

// errWatcherRunning is Run's error when it is already running.
var errWatcherRunning = errors.New("security: TLSWatcher.Run is already running")

// Run reads the files at once, loading and applying every listener's
// configuration (the files may have changed since the host read them),
// then every Interval, applying the listeners whose files changed, until
// ctx ends; it then returns ctx's error. A watcher of no listeners (an
// empty map) runs too, reading nothing until SetListeners gives it some,
// as a host that adds a TLS listener at run time does. It returns an
// error at once if the watcher was not made by NewTLSWatcher with a map of
// sources and an apply function, or is running already.
func (w *TLSWatcher) Run(ctx context.Context) error {
	w.mu.Lock()
	made := w.apply != nil && w.sources != nil
	w.mu.Unlock()
	if !made {
		return errors.New("security: TLSWatcher needs a map of sources and an apply function (NewTLSWatcher)")
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
		w.poll(w.sources, seen, log)
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
	}
}

// poll reads each listener's files, in the order of their names, and
// applies those that changed since seen, which it updates.
func (w *TLSWatcher) poll(sources map[protocolmap.ListenerName]TLSSource, seen map[protocolmap.ListenerName][sha256.Size]byte, log *slog.Logger) {
	for _, name := range slices.Sorted(maps.Keys(sources)) {
		src := sources[name]
		if len(src.Files) == 0 || src.Load == nil {
			continue
		}
		sum := fingerprint(src.Files)
		before, known := seen[name]
		if known && before == sum {
			continue
		}
		seen[name] = sum
		cfg, err := src.Load()
		if err != nil {
			log.Error("TLS files do not load; the configuration in force stays", "listener", name, "files", src.Files, "err", err)
			continue
		}
		if err := w.apply(name, cfg); err != nil {
			log.Error("TLS reload refused; the configuration in force stays", "listener", name, "files", src.Files, "err", err)
			continue
		}
		if known {
			log.Info("TLS files changed; reloaded", "listener", name, "files", src.Files)
		} else {
			log.Debug("TLS files read; applied", "listener", name, "files", src.Files)
		}
	}
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
