package main

import (
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/listener"
)

// keyMemoryLimit is the example broker's kafkanet.memory.limit.bytes: the
// Go runtime's soft memory limit (debug.SetMemoryLimit). Unset, the broker
// sets one from its request-memory budget when it has one and the
// environment sets no GOMEMLIMIT; -1 sets none; a positive value is the
// limit itself.
const keyMemoryLimit = "kafkanet.memory.limit.bytes"

// readMemoryLimit reads kafkanet.memory.limit.bytes: 0 when unset (the
// broker derives the limit), -1 for none, or the limit.
func readMemoryLimit(cfg *brokerConfig) (int64, error) {
	v, ok := cfg.Properties().Get(keyMemoryLimit)
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n == 0 || n < -1 {
		return 0, &config.Error{Key: keyMemoryLimit, Value: v, Err: listener.ErrInvalidValue,
			Rule: "Expected a positive number of bytes, or -1 for no limit"}
	}
	return n, nil
}

// memoryLimit keeps the Go runtime's soft memory limit where the broker's
// memory bound says, as a Kafka broker runs with a fixed heap (-Xmx).
//
// queued.max.request.bytes bounds the bytes of requests in hand, not the
// heap: with GOGC's default the heap grows to twice what was live at the
// last collection, requests included, before the next. So, derived from
// the budget, the limit is twice the brokers' budgets together, on top of
// the records the log holds (which are live, and in memory in this
// broker): the collector then runs before the requests' garbage outgrows
// the budget again, and never for the log's sake alone. It follows the log
// as it grows and shrinks, checked every memoryLimitEvery. A fixed limit
// (kafkanet.memory.limit.bytes) is set once. What the runtime had before
// is restored when the broker stops.
type memoryLimit struct {
	requests int64         // twice the budgets; 0 for a fixed limit
	stored   func() int64  // the bytes the log holds
	previous int64         // the runtime's limit before
	set      int64         // the limit set last
	stop     chan struct{} // closed by close
	done     sync.WaitGroup
}

// memoryLimitEvery is how often a derived limit follows the log.
const memoryLimitEvery = time.Second

// startMemoryLimit sets the runtime's memory limit for c as its settings
// say, and logs it; it returns nil, setting nothing, when there is to be
// none: kafkanet.memory.limit.bytes=-1, no budget, or GOMEMLIMIT in the
// environment, which the operator set and the runtime applies already.
func startMemoryLimit(c *cluster, logger *slog.Logger) *memoryLimit {
	set := c.settings
	switch {
	case set.memoryLimit < 0:
		logger.Info("memory limit: none", "reason", keyMemoryLimit+"=-1")
		return nil
	case os.Getenv("GOMEMLIMIT") != "":
		logger.Info("memory limit: the environment's", "GOMEMLIMIT", os.Getenv("GOMEMLIMIT"))
		return nil
	case set.memoryLimit > 0:
		m := &memoryLimit{stop: make(chan struct{})}
		m.previous = debug.SetMemoryLimit(set.memoryLimit)
		m.set = set.memoryLimit
		logger.Info("memory limit", "bytes", m.set, "from", keyMemoryLimit)
		return m
	case set.requestBudget <= 0:
		logger.Info("memory limit: none", "reason", "no queued.max.request.bytes")
		return nil
	}
	m := &memoryLimit{requests: 2 * set.requestBudget * int64(len(c.brokers)), stored: c.state.stored.Load, stop: make(chan struct{})}
	m.set = m.derived()
	m.previous = debug.SetMemoryLimit(m.set)
	logger.Info("memory limit", "bytes", m.set, "from", "twice queued.max.request.bytes of each broker, plus the log's records",
		"off", keyMemoryLimit+"=-1")
	m.done.Go(m.follow)
	return m
}

// derived is the limit for the log's size now.
func (m *memoryLimit) derived() int64 { return m.requests + m.stored() }

// follow moves the limit with the log, by at least a sixteenth of it, until
// close.
func (m *memoryLimit) follow() {
	t := time.NewTicker(memoryLimitEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if want := m.derived(); abs(want-m.set) > m.set/16 {
				m.set = want
				debug.SetMemoryLimit(want)
			}
		case <-m.stop:
			return
		}
	}
}

// close stops following the log and restores the runtime's limit. m may
// be nil.
func (m *memoryLimit) close() {
	if m == nil {
		return
	}
	close(m.stop)
	m.done.Wait()
	debug.SetMemoryLimit(m.previous)
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
