package main

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The log's keys: Kafka's broker-wide defaults and the topic configs that
// override them.
const (
	keyLogRetentionBytes   = "log.retention.bytes"
	keyLogRetentionMs      = "log.retention.ms"
	keyLogRetentionMinutes = "log.retention.minutes"
	keyLogRetentionHours   = "log.retention.hours"
	keyRetentionCheck      = "log.retention.check.interval.ms"
	keyMessageMaxBytes     = "message.max.bytes"

	topicRetentionBytes  = "retention.bytes"
	topicRetentionMs     = "retention.ms"
	topicMaxMessageBytes = "max.message.bytes"
)

// Defaults. Kafka keeps a partition's records for 168 hours with no size
// limit; the example broker keeps them in memory, so its default size
// limit is 256 MiB per partition, which a small machine can hold for a few
// partitions. Set log.retention.bytes=-1 for Kafka's unlimited.
const (
	defaultRetentionBytes  = 256 << 20
	defaultRetentionHours  = 168
	defaultRetentionCheck  = 5 * time.Minute // Kafka's 300000 ms
	defaultMessageMaxBytes = 1048588         // Kafka's message.max.bytes
)

// logConfig is how one topic's partitions keep records: the broker's
// settings, or the topic's own configs over them.
type logConfig struct {
	retentionBytes  int64 // -1: no limit
	retentionMs     int64 // -1: no limit
	maxMessageBytes int   // the largest record batch a produce may store
}

// logSettings are the broker's log keys.
type logSettings struct {
	defaults      logConfig
	checkInterval time.Duration // how often time retention runs
}

// readLogSettings reads log.retention.bytes, log.retention.ms (else
// log.retention.minutes, else log.retention.hours, as Kafka prefers them),
// log.retention.check.interval.ms and message.max.bytes.
func readLogSettings(cfg *brokerConfig) (logSettings, error) {
	s := logSettings{defaults: logConfig{retentionBytes: defaultRetentionBytes}}
	bytes, err := cfg.Properties().Int(keyLogRetentionBytes, defaultRetentionBytes, -1)
	if err != nil {
		return logSettings{}, err
	}
	s.defaults.retentionBytes = int64(bytes)
	s.defaults.retentionMs = defaultRetentionHours * int64(time.Hour/time.Millisecond)
	for _, k := range []struct {
		key  string
		unit time.Duration
	}{{keyLogRetentionMs, time.Millisecond}, {keyLogRetentionMinutes, time.Minute}, {keyLogRetentionHours, time.Hour}} {
		if _, ok := cfg.Properties().Get(k.key); !ok {
			continue
		}
		v, err := cfg.Properties().Int(k.key, 0, -1)
		if err != nil {
			return logSettings{}, err
		}
		s.defaults.retentionMs = int64(v) * int64(k.unit/time.Millisecond)
		if v < 0 {
			s.defaults.retentionMs = -1
		}
		break
	}
	check, err := cfg.Properties().Int(keyRetentionCheck, int(defaultRetentionCheck/time.Millisecond), 1)
	if err != nil {
		return logSettings{}, err
	}
	s.checkInterval = time.Duration(check) * time.Millisecond
	if s.defaults.maxMessageBytes, err = cfg.Properties().Int(keyMessageMaxBytes, defaultMessageMaxBytes, 0); err != nil {
		return logSettings{}, err
	}
	return s, nil
}

// topicLogConfig checks a CreateTopics request's configs (checkTopicConfigs)
// and lays those of the log over the broker's defaults.
func topicLogConfig(defaults logConfig, configs map[string]*string) (logConfig, error) {
	if err := checkTopicConfigs(configs); err != nil {
		return logConfig{}, err
	}
	c := defaults
	c.retentionBytes = configInt(configs, topicRetentionBytes, c.retentionBytes)
	c.retentionMs = configInt(configs, topicRetentionMs, c.retentionMs)
	c.maxMessageBytes = int(configInt(configs, topicMaxMessageBytes, int64(c.maxMessageBytes)))
	return c, nil
}

// checkBatchSizes refuses record batches larger than the topic's
// max.message.bytes with MESSAGE_TOO_LARGE, as Kafka's log does
// (RecordTooLargeException).
func checkBatchSizes(cfg logConfig, batches []batch) error {
	for _, b := range batches {
		if len(b.raw) > cfg.maxMessageBytes {
			return fmt.Errorf("%w: the record batch is %d bytes, larger than the topic's %s %d",
				kerr.MessageTooLarge, len(b.raw), topicMaxMessageBytes, cfg.maxMessageBytes)
		}
	}
	return nil
}

// enforceSize drops whole batches from the front of part while what is
// left still holds at least retentionBytes, as Kafka deletes a segment only
// when the log stays at or above retention.bytes without it; the newest
// batch always stays. It runs under the state's lock, on every append, so
// that memory stays bounded between retention checks.
func (part *partition) enforceSize(retentionBytes int64) {
	if retentionBytes < 0 {
		return
	}
	drop := 0
	for drop < len(part.batches)-1 && part.size-int64(len(part.batches[drop].raw)) >= retentionBytes {
		part.size -= int64(len(part.batches[drop].raw))
		drop++
	}
	part.dropFront(drop)
}

// enforceTime drops whole batches from the front of part whose newest
// record is older than retentionMs before now (Kafka's time retention, by
// the batch's MaxTimestamp); the newest batch always stays.
func (part *partition) enforceTime(retentionMs int64, now time.Time) {
	if retentionMs < 0 {
		return
	}
	cutoff := now.UnixMilli() - retentionMs
	drop := 0
	for drop < len(part.batches)-1 && maxTimestamp(part.batches[drop].raw) < cutoff {
		part.size -= int64(len(part.batches[drop].raw))
		drop++
	}
	part.dropFront(drop)
}

// dropFront forgets the first n batches and moves the log start offset to
// the first batch kept. The slice is copied once half of it is dropped, so
// that dropped batches are garbage.
func (part *partition) dropFront(n int) {
	if n == 0 {
		return
	}
	for i := range n {
		part.batches[i] = batch{}
	}
	part.batches = part.batches[n:]
	if cap(part.batches) > 2*len(part.batches)+16 {
		part.batches = append([]batch(nil), part.batches...)
	}
	part.logStart = part.batches[0].base
}

// maxTimestamp is a record batch's MaxTimestamp field.
func maxTimestamp(raw []byte) int64 { return int64(binary.BigEndian.Uint64(raw[35:43])) }

// expireRecords applies time retention every log.retention.check.interval.ms
// until the cluster stops.
func (c *cluster) expireRecords() {
	t := time.NewTicker(c.settings.log.checkInterval)
	defer t.Stop()
	for {
		select {
		case now := <-t.C:
			c.state.expire(now)
		case <-c.stopping:
			return
		}
	}
}
