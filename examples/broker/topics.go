package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file is the example's topic administration: CreateTopics with the
// topic configs Kafka knows, and DeleteTopics.

func (b *broker) createTopics(req *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse {
	resp := kmsg.NewPtrCreateTopicsResponse()
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		partitions, replication := rt.NumPartitions, rt.ReplicationFactor
		if partitions == -1 {
			partitions = b.c.settings.numPartitions
		}
		if replication == -1 {
			replication = 1
		}
		var err error
		switch {
		case len(rt.ReplicaAssignment) > 0:
			err = fmt.Errorf("%w: this broker assigns replicas itself", kerr.InvalidRequest)
		case partitions < 1 || partitions > maxPartitions:
			err = fmt.Errorf("%w: %d partitions; want 1 to %d", kerr.InvalidPartitions, partitions, maxPartitions)
		case replication < 1 || int(replication) > len(b.c.brokers):
			err = fmt.Errorf("%w: replication factor %d with %d brokers", kerr.InvalidReplicationFactor, replication, len(b.c.brokers))
		default:
			configs := map[string]*string{}
			for _, c := range rt.Configs {
				configs[c.Name] = c.Value
			}
			var log logConfig
			if log, err = topicLogConfig(b.c.settings.log.defaults, configs); err != nil {
				break
			}
			var t *topic
			if t, err = b.c.state.createTopic(rt.Topic, partitions, replication, log, req.ValidateOnly); err == nil {
				st.TopicID, st.NumPartitions, st.ReplicationFactor = t.id, partitions, replication
			}
		}
		if err != nil {
			st.ErrorCode, st.ErrorMessage = errorCode(err), kmsg.StringPtr(err.Error())
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// deleteTopics answers a DeleteTopics as Kafka does: each topic, given by
// name or (v6+) by id, goes with its records and the offsets groups
// committed for it; an unknown name is UNKNOWN_TOPIC_OR_PARTITION, an
// unknown id UNKNOWN_TOPIC_ID, and a topic given twice (the same name or id,
// or its name and its id) INVALID_REQUEST, once, and is not deleted.
// Internal topics may be deleted, as in Kafka; FindCoordinator creates
// __consumer_offsets again. With delete.topic.enable=false every topic is
// refused with TOPIC_DELETION_DISABLED (INVALID_REQUEST before v3).
func (b *broker) deleteTopics(req *kmsg.DeleteTopicsRequest) *kmsg.DeleteTopicsResponse {
	resp := kmsg.NewPtrDeleteTopicsResponse()
	refs := req.Topics
	if req.Version < 6 {
		refs = make([]kmsg.DeleteTopicsRequestTopic, len(req.TopicNames))
		for i, name := range req.TopicNames {
			refs[i].Topic = kmsg.StringPtr(name)
		}
	}
	answer := func(name *string, id [16]byte, err error) {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = name, id
		if err != nil {
			st.ErrorCode, st.ErrorMessage = errorCode(err), kmsg.StringPtr(err.Error())
		}
		resp.Topics = append(resp.Topics, st)
	}
	if !b.c.settings.deleteTopics {
		err := error(kerr.TopicDeletionDisabled)
		if req.Version < 3 {
			err = fmt.Errorf("%w: topic deletion is disabled (delete.topic.enable=false)", kerr.InvalidRequest)
		}
		for _, rt := range refs {
			answer(rt.Topic, rt.TopicID, err)
		}
		return resp
	}

	// First each reference is resolved, and a topic referred to twice
	// found; then the others are deleted, in the request's order.
	type resolved struct {
		rt  kmsg.DeleteTopicsRequestTopic
		t   *topic
		err error
	}
	var all []resolved
	times := map[*topic]int{}
	for _, rt := range refs {
		r := resolved{rt: rt}
		switch {
		case rt.Topic == nil && rt.TopicID == [16]byte{}:
			r.err = fmt.Errorf("%w: neither a topic name nor a topic id", kerr.InvalidRequest)
		case rt.Topic != nil && rt.TopicID != [16]byte{}:
			r.err = fmt.Errorf("%w: a topic name and a topic id at once", kerr.InvalidRequest)
		case rt.Topic != nil:
			if r.t = b.c.state.topic(*rt.Topic); r.t == nil {
				r.err = kerr.UnknownTopicOrPartition
			}
		default:
			if r.t = b.c.state.topicByID(rt.TopicID); r.t == nil {
				r.err = kerr.UnknownTopicID
			}
		}
		if r.t != nil {
			times[r.t]++
		}
		all = append(all, r)
	}
	for _, r := range all {
		switch {
		case r.err != nil:
			answer(r.rt.Topic, r.rt.TopicID, r.err)
		case times[r.t] > 1:
			answer(r.rt.Topic, r.rt.TopicID, fmt.Errorf("%w: topic %s is named more than once, by name or id", kerr.InvalidRequest, r.t.name))
			times[r.t] = 0 // answered once
		case times[r.t] == 1:
			answer(kmsg.StringPtr(r.t.name), r.t.id, b.c.groups.deleteTopic(r.t))
		}
	}
	return resp
}

// configKind is the type Kafka parses a topic config's value as.
type configKind int

const (
	kindInt      configKind = iota // a 32-bit integer
	kindLong                       // a 64-bit integer
	kindDouble                     // a floating-point number
	kindBoolean                    // true or false, in any case
	kindString                     // one of values
	kindList                       // comma-separated, each one of values
	kindReplicas                   // a throttled-replica list: * or partition:broker,...
)

// topicConfigRule is how Kafka checks the value of one topic config.
type topicConfigRule struct {
	kind       configKind
	min, max   float64  // kindInt, kindLong, kindDouble: the range
	orMinusOne bool     // -1 is allowed too
	values     []string // kindString, kindList: the values allowed
}

func intRange(min, max float64) topicConfigRule {
	return topicConfigRule{kind: kindInt, min: min, max: max}
}
func intAtLeast(min float64) topicConfigRule { return intRange(min, math.MaxInt32) }
func longAtLeast(min float64) topicConfigRule {
	return topicConfigRule{kind: kindLong, min: min, max: math.MaxInt64}
}

var (
	anyLong = longAtLeast(math.MinInt64) // negative: no limit
	boolean = topicConfigRule{kind: kindBoolean}
)

// topicConfigs are the topic configs of Kafka 4.x (the names of its
// TopicConfig, and the throttled-replica lists and internal.segment.bytes
// that its LogConfig adds), each with the type and range Kafka checks its
// value against. CreateTopics refuses any other name with INVALID_CONFIG,
// as Kafka does. The example broker applies only retention.bytes,
// retention.ms and max.message.bytes; it checks and forgets the others.
var topicConfigs = map[string]topicConfigRule{
	"cleanup.policy":                          {kind: kindList, values: []string{"compact", "delete"}},
	"compression.gzip.level":                  {kind: kindInt, min: 1, max: 9, orMinusOne: true},
	"compression.lz4.level":                   intRange(1, 17),
	"compression.type":                        {kind: kindString, values: []string{"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"}},
	"compression.zstd.level":                  intRange(-131072, 22),
	"delete.retention.ms":                     longAtLeast(0),
	"file.delete.delay.ms":                    longAtLeast(0),
	"flush.messages":                          longAtLeast(1),
	"flush.ms":                                longAtLeast(0),
	"follower.replication.throttled.replicas": {kind: kindReplicas},
	"index.interval.bytes":                    intAtLeast(0),
	"internal.segment.bytes":                  intAtLeast(math.MinInt32),
	"leader.replication.throttled.replicas":   {kind: kindReplicas},
	"local.retention.bytes":                   longAtLeast(-2),
	"local.retention.ms":                      longAtLeast(-2),
	"max.compaction.lag.ms":                   longAtLeast(1),
	topicMaxMessageBytes:                      intAtLeast(0),
	"message.downconversion.enable":           boolean, // deprecated, a no-op since Kafka 4.0
	"message.timestamp.after.max.ms":          longAtLeast(0),
	"message.timestamp.before.max.ms":         longAtLeast(0),
	"message.timestamp.type":                  {kind: kindString, values: []string{"CreateTime", "LogAppendTime"}},
	"min.cleanable.dirty.ratio":               {kind: kindDouble, min: 0, max: 1},
	"min.compaction.lag.ms":                   longAtLeast(0),
	"min.insync.replicas":                     intAtLeast(1),
	"preallocate":                             boolean,
	"remote.copy.lag.bytes":                   longAtLeast(-1),
	"remote.copy.lag.ms":                      longAtLeast(-1),
	"remote.log.copy.disable":                 boolean,
	"remote.log.delete.on.disable":            boolean,
	topicRemoteStorageEnable:                  boolean,
	topicRetentionBytes:                       anyLong,
	topicRetentionMs:                          longAtLeast(-1),
	"segment.bytes":                           intAtLeast(1 << 20),
	"segment.index.bytes":                     intAtLeast(4),
	"segment.jitter.ms":                       longAtLeast(0),
	"segment.ms":                              longAtLeast(1),
	"unclean.leader.election.enable":          boolean,
}

// topicRemoteStorageEnable turns tiered storage on for a topic, which the
// example broker, like a Kafka broker without
// remote.log.storage.system.enable, refuses.
const topicRemoteStorageEnable = "remote.storage.enable"

// checkTopicConfigs checks a CreateTopics request's configs as Kafka does:
// a null value, then an unknown name, then a value that does not parse or
// is out of range is INVALID_CONFIG. Names are looked at in sorted order,
// so that the error is the same whatever the request's order.
func checkTopicConfigs(configs map[string]*string) error {
	names := slices.Sorted(maps.Keys(configs))
	var null []string
	for _, name := range names {
		if configs[name] == nil {
			null = append(null, name)
		}
	}
	if len(null) > 0 {
		return fmt.Errorf("%w: Null value not supported for topic configs: %s", kerr.InvalidConfig, strings.Join(null, ","))
	}
	for _, name := range names {
		if _, ok := topicConfigs[name]; !ok {
			return fmt.Errorf("%w: Unknown topic config name: %s", kerr.InvalidConfig, name)
		}
	}
	for _, name := range names {
		if err := topicConfigs[name].check(*configs[name]); err != nil {
			return fmt.Errorf("%w: invalid value %s for configuration %s: %s", kerr.InvalidConfig, *configs[name], name, err)
		}
	}
	minLag, maxLag := configInt(configs, "min.compaction.lag.ms", 0), configInt(configs, "max.compaction.lag.ms", math.MaxInt64)
	if minLag > maxLag {
		return fmt.Errorf("%w: min.compaction.lag.ms %d is above max.compaction.lag.ms %d", kerr.InvalidConfig, minLag, maxLag)
	}
	if v := configs[topicRemoteStorageEnable]; v != nil && strings.EqualFold(strings.TrimSpace(*v), "true") {
		return fmt.Errorf("%w: %s=true: the example broker has no tiered storage", kerr.InvalidConfig, topicRemoteStorageEnable)
	}
	return nil
}

// configInt returns the integer config name of configs, already checked,
// or def when it is not set.
func configInt(configs map[string]*string, name string, def int64) int64 {
	v, ok := configs[name]
	if !ok {
		return def
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(*v), 10, 64)
	return n
}

// ruleError is why a value breaks its config's rule, in the words of
// Kafka's ConfigDef.
type ruleError string

func (e ruleError) Error() string { return string(e) }

// check says why v breaks r, nil if it does not. Values are trimmed first,
// as Kafka trims them.
func (r topicConfigRule) check(v string) error {
	v = strings.TrimSpace(v)
	switch r.kind {
	case kindInt, kindLong:
		bits, name := 64, "LONG"
		if r.kind == kindInt {
			bits, name = 32, "INT"
		}
		n, err := strconv.ParseInt(v, 10, bits)
		if err != nil {
			return ruleError("Not a number of type " + name)
		}
		return r.checkRange(float64(n))
	case kindDouble:
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return ruleError("Not a number of type DOUBLE")
		}
		return r.checkRange(n)
	case kindBoolean:
		if !strings.EqualFold(v, "true") && !strings.EqualFold(v, "false") {
			return ruleError("Expected value to be either true or false")
		}
	case kindString:
		if r.values != nil && !slices.Contains(r.values, v) {
			return ruleError("String must be one of: " + strings.Join(r.values, ", "))
		}
	case kindList:
		for item := range strings.SplitSeq(v, ",") {
			if item = strings.TrimSpace(item); item != "" && !slices.Contains(r.values, item) {
				return ruleError("String must be one of: " + strings.Join(r.values, ", "))
			}
		}
	case kindReplicas:
		if v == "*" {
			return nil
		}
		for item := range strings.SplitSeq(v, ",") {
			item = strings.TrimSpace(item)
			partition, broker, ok := strings.Cut(item, ":")
			if item != "" && (!ok || !digits(partition) || !digits(broker)) {
				return ruleError("must be the literal '*' or a list of replicas in the form [partitionId]:[brokerId],...")
			}
		}
	}
	return nil
}

// checkRange says why n is outside r's range, nil if it is inside.
func (r topicConfigRule) checkRange(n float64) error {
	switch {
	case r.orMinusOne && n == -1:
	case n < r.min:
		return ruleError("Value must be at least " + strconv.FormatFloat(r.min, 'f', -1, 64))
	case n > r.max:
		return ruleError("Value must be no more than " + strconv.FormatFloat(r.max, 'f', -1, 64))
	}
	return nil
}

// digits reports whether s is one or more decimal digits.
func digits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}
