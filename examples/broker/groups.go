package main

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/socketserver"
)

// This file is the example's group coordinator: the classic rebalance
// protocol of Kafka's GroupCoordinator (JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup) and offsets kept in memory (OffsetCommit, OffsetFetch), with
// FindCoordinator, DescribeGroups and ListGroups. One coordinator holds every
// group of the cluster, but each group belongs to one broker, which alone
// answers its requests; the others answer NOT_COORDINATOR, as in Kafka.

// groupSettings are the coordinator's keys of the broker's properties.
type groupSettings struct {
	// initialRebalanceDelay is group.initial.rebalance.delay.ms: how long
	// the first rebalance of an empty group waits for more members.
	initialRebalanceDelay time.Duration
	// minSession and maxSession are group.min.session.timeout.ms and
	// group.max.session.timeout.ms, the session timeouts JoinGroup accepts.
	minSession, maxSession time.Duration
	// offsetsPartitions and offsetsReplication are
	// offsets.topic.num.partitions and offsets.topic.replication.factor:
	// the partitions and replicas of __consumer_offsets when FindCoordinator
	// (or Metadata) creates it. A group's coordinator is the leader of one of
	// offsetsPartitions partitions (coordinatorOf).
	offsetsPartitions  int32
	offsetsReplication int16
}

// The keys of __consumer_offsets, with Kafka's defaults.
const (
	keyOffsetsTopicPartitions  = "offsets.topic.num.partitions"
	keyOffsetsTopicReplication = "offsets.topic.replication.factor"

	defaultOffsetsTopicPartitions  = 50
	defaultOffsetsTopicReplication = 3
)

// readGroupSettings reads the coordinator's keys, with Kafka's defaults.
func readGroupSettings(cfg *brokerConfig) (groupSettings, error) {
	delay, err := cfg.Properties().Int("group.initial.rebalance.delay.ms", 3000, 0)
	if err != nil {
		return groupSettings{}, err
	}
	minSession, err := cfg.Properties().Int("group.min.session.timeout.ms", 6000, 0)
	if err != nil {
		return groupSettings{}, err
	}
	maxSession, err := cfg.Properties().Int("group.max.session.timeout.ms", 1800000, 0)
	if err != nil {
		return groupSettings{}, err
	}
	if maxSession < minSession {
		return groupSettings{}, &config.Error{Key: "group.max.session.timeout.ms", Value: strconv.Itoa(maxSession),
			Err: listener.ErrInvalidValue, Rule: fmt.Sprintf("must be at least group.min.session.timeout.ms (%d)", minSession)}
	}
	partitions, err := boundedInt(cfg.Properties(), keyOffsetsTopicPartitions, defaultOffsetsTopicPartitions, 1, maxPartitions)
	if err != nil {
		return groupSettings{}, err
	}
	replication, err := boundedInt(cfg.Properties(), keyOffsetsTopicReplication, defaultOffsetsTopicReplication, 1, math.MaxInt16) // a short in Kafka
	if err != nil {
		return groupSettings{}, err
	}
	return groupSettings{
		initialRebalanceDelay: time.Duration(delay) * time.Millisecond,
		minSession:            time.Duration(minSession) * time.Millisecond,
		maxSession:            time.Duration(maxSession) * time.Millisecond,
		offsetsPartitions:     int32(partitions),
		offsetsReplication:    int16(replication),
	}, nil
}

// offsetsTopicName is the topic Kafka keeps groups and their offsets in.
// The example keeps them in memory (coordinator), but creates the topic, as
// clients and tools expect to see it.
const offsetsTopicName = "__consumer_offsets"

// createOffsetsTopic creates __consumer_offsets unless it exists, with
// offsets.topic.num.partitions partitions and offsets.topic.replication.factor
// replicas, as Kafka creates it when FindCoordinator or Metadata first
// names it. A cluster of fewer brokers than the replication factor gets as
// many replicas as it has brokers: Kafka would refuse to create the topic
// until enough brokers joined, and the example's brokers all start at once.
func (c *cluster) createOffsetsTopic() (*topic, error) {
	g := c.settings.groups
	replication := min(g.offsetsReplication, int16(len(c.brokers)))
	t, err := c.state.createTopic(offsetsTopicName, g.offsetsPartitions, replication, c.settings.log.defaults, false)
	if errors.Is(err, kerr.TopicAlreadyExists) {
		err = nil
	}
	return t, err
}

// maxOffsetMetadata is Kafka's default offset.metadata.max.bytes.
const maxOffsetMetadata = 4096

// coordinatorOf returns the node id of the broker that coordinates group
// id: the leader of the partition of __consumer_offsets that Kafka keeps the
// group in, abs(hashCode(id)) % offsets.topic.num.partitions, with Java's
// String hash code and Kafka's abs (Utils.abs, which makes MinInt32 0).
func (c *cluster) coordinatorOf(id string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(id)) {
		h = 31*h + int32(u)
	}
	switch {
	case h == math.MinInt32:
		h = 0
	case h < 0:
		h = -h
	}
	return c.leader(h % c.settings.groups.offsetsPartitions)
}

// groupError returns the error every request about group id gets on
// broker b before the group is looked at: INVALID_GROUP_ID for an empty id
// where the API needs one, NOT_COORDINATOR on a broker that does not
// coordinate the group.
func (b *broker) groupError(id string, needID bool) error {
	switch {
	case needID && id == "":
		return kerr.InvalidGroupID
	case b.c.coordinatorOf(id) != b.id:
		return kerr.NotCoordinator
	}
	return nil
}

// findCoordinator answers with the coordinator of each group key. Only
// groups (key type 0) have one: transactional ids (type 1) and share groups
// (type 2) get INVALID_REQUEST, since the example has neither.
func (b *broker) findCoordinator(r *socketserver.Request, req *kmsg.FindCoordinatorRequest) *kmsg.FindCoordinatorResponse {
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	brokers := socketserver.MetadataBrokers(r.Conn.Listener, b.c.brokerInfos())
	// The first FindCoordinator for a group creates __consumer_offsets, as
	// in Kafka; creating it here is immediate, so the answer can name the
	// coordinator at once where Kafka answers COORDINATOR_NOT_AVAILABLE
	// until the topic is there.
	var offsetsErr error
	if req.CoordinatorType == 0 {
		if _, err := b.c.createOffsetsTopic(); err != nil {
			offsetsErr = fmt.Errorf("%w: cannot create %s: %v", kerr.CoordinatorNotAvailable, offsetsTopicName, err)
		}
	}
	resp := kmsg.NewPtrFindCoordinatorResponse()
	for _, key := range keys {
		rc := kmsg.NewFindCoordinatorResponseCoordinator()
		rc.Key, rc.NodeID, rc.Port = key, -1, -1
		var err error
		switch req.CoordinatorType {
		case 0:
			if offsetsErr != nil {
				err = offsetsErr
				break
			}
			err = kerr.CoordinatorNotAvailable // unless the coordinator is on this listener
			id := b.c.coordinatorOf(key)
			for _, mb := range brokers {
				if mb.NodeID == id {
					rc.NodeID, rc.Host, rc.Port, err = id, mb.Host, mb.Port, nil
				}
			}
		case 1:
			err = fmt.Errorf("%w: the example broker has no transaction coordinator", kerr.InvalidRequest)
		default:
			err = fmt.Errorf("%w: coordinator type %d; the example broker coordinates only groups (0)", kerr.InvalidRequest, req.CoordinatorType)
		}
		if err != nil {
			rc.ErrorCode, rc.ErrorMessage = errorCode(err), kmsg.StringPtr(err.Error())
		}
		resp.Coordinators = append(resp.Coordinators, rc)
	}
	if req.Version < 4 {
		rc := resp.Coordinators[0]
		resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = rc.ErrorCode, rc.ErrorMessage, rc.NodeID, rc.Host, rc.Port
		resp.Coordinators = nil
	}
	return resp
}

// joinGroup answers a JoinGroup now, or when the rebalance it joins
// completes; meanwhile a goroutine watches for the client going away.
func (b *broker) joinGroup(r *socketserver.Request, req *kmsg.JoinGroupRequest) {
	if err := b.groupError(req.Group, true); err != nil {
		b.respond(r, joinErrorResponse(req.MemberID, err))
		return
	}
	if w := b.c.groups.join(b, r, req); w != nil {
		b.c.waiting.Go(func() { b.c.groups.watch(w) })
	}
}

// syncGroup answers a SyncGroup now, or, for a follower that comes before
// the leader, when the leader sends the assignment.
func (b *broker) syncGroup(r *socketserver.Request, req *kmsg.SyncGroupRequest) {
	if err := b.groupError(req.Group, true); err != nil {
		b.respond(r, syncErrorResponse(err))
		return
	}
	if w := b.c.groups.sync(b, r, req); w != nil {
		b.c.waiting.Go(func() { b.c.groups.watch(w) })
	}
}

// heartbeat answers a Heartbeat: NONE, or why the member must rejoin.
func (b *broker) heartbeat(req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := kmsg.NewPtrHeartbeatResponse()
	err := b.groupError(req.Group, true)
	if err == nil {
		err = b.c.groups.heartbeat(req)
	}
	resp.ErrorCode = errorCode(err)
	return resp
}

// leaveGroup answers a LeaveGroup; the group rebalances without the
// members that left.
func (b *broker) leaveGroup(req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	if err := b.groupError(req.Group, true); err != nil {
		resp := kmsg.NewPtrLeaveGroupResponse()
		resp.ErrorCode = errorCode(err)
		return resp
	}
	return b.c.groups.leave(req)
}

// offsetCommit answers an OffsetCommit, storing the offsets the committer
// may commit.
func (b *broker) offsetCommit(req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	return b.c.groups.commit(req, b.groupError(req.Group, false))
}

// offsetFetch answers with committed offsets: those of one group (v0-v7) or
// of several (v8+), partitions by name, or by topic id in v10+.
func (b *broker) offsetFetch(req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := kmsg.NewPtrOffsetFetchResponse()
	if req.Version >= 8 {
		for _, rg := range req.Groups {
			sg := kmsg.NewOffsetFetchResponseGroup()
			sg.Group = rg.Group
			if err := b.groupError(rg.Group, false); err != nil {
				sg.ErrorCode = errorCode(err)
			} else {
				var want []wantedOffsets
				for _, rt := range rg.Topics {
					want = append(want, wantedOffsets{rt.Topic, rt.TopicID, rt.Partitions})
				}
				sg.Topics = b.c.groups.offsets(rg.Group, want, rg.Topics == nil, req.Version >= 10)
			}
			resp.Groups = append(resp.Groups, sg)
		}
		return resp
	}
	var want []wantedOffsets
	for _, rt := range req.Topics {
		want = append(want, wantedOffsets{topic: rt.Topic, partitions: rt.Partitions})
	}
	all := req.Version >= 2 && req.Topics == nil
	err := b.groupError(req.Group, false)
	if err != nil && req.Version >= 2 {
		resp.ErrorCode = errorCode(err)
		return resp
	}
	var topics []kmsg.OffsetFetchResponseGroupTopic
	if err == nil {
		topics = b.c.groups.offsets(req.Group, want, all, false)
	} else { // v0 and v1 have only partition errors
		topics = offsetErrors(want, err)
	}
	for _, gt := range topics {
		st := kmsg.NewOffsetFetchResponseTopic()
		st.Topic = gt.Topic
		for _, gp := range gt.Partitions {
			sp := kmsg.NewOffsetFetchResponseTopicPartition()
			sp.Partition, sp.Offset, sp.LeaderEpoch, sp.Metadata, sp.ErrorCode = gp.Partition, gp.Offset, gp.LeaderEpoch, gp.Metadata, gp.ErrorCode
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// describeGroups answers a DescribeGroups: the state and members of each
// group this broker coordinates, NOT_COORDINATOR for the others.
func (b *broker) describeGroups(req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := kmsg.NewPtrDescribeGroupsResponse()
	for _, id := range req.Groups {
		dg := kmsg.NewDescribeGroupsResponseGroup()
		dg.Group = id
		if err := b.groupError(id, false); err != nil {
			dg.ErrorCode = errorCode(err)
		} else {
			b.c.groups.describe(&dg, req.Version)
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

// listGroups lists the groups b coordinates, as Kafka's brokers do: a
// client lists a cluster's groups by asking every broker.
func (b *broker) listGroups(req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := kmsg.NewPtrListGroupsResponse()
	resp.Groups = b.c.groups.list(func(id string) bool { return b.c.coordinatorOf(id) == b.id }, req.StatesFilter, req.TypesFilter)
	return resp
}

// groupState is the state of a group in the classic rebalance protocol.
type groupState int8

const (
	groupEmpty               groupState = iota // no members, perhaps offsets
	groupPreparingRebalance                    // waiting for the members to (re)join
	groupCompletingRebalance                   // waiting for the leader's assignment
	groupStable                                // every member has its assignment
)

// String returns the state's name in Kafka (DescribeGroups, ListGroups).
func (s groupState) String() string {
	return [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable"}[s]
}

// coordinator is the cluster's group coordinator: every group, their
// members and committed offsets, guarded by one mutex. Deadlines (sessions,
// rebalance timeouts, the initial delay) are kept by one goroutine, run.
type coordinator struct {
	settings groupSettings
	log      *slog.Logger
	topics   *state
	stopping <-chan struct{} // closed when the cluster stops
	wake     chan struct{}   // tells run that a deadline may have changed

	mu     sync.Mutex
	groups map[string]*group
}

// group is one consumer group.
type group struct {
	id           string
	state        groupState
	generation   int32
	protocolType string // of the members, set by the first to join an empty group
	protocol     string // chosen for the generation; "" when there is none
	leader       string // member id of the leader; "" when there are no members
	members      map[string]*member
	statics      map[string]string // group.instance.id -> member id
	// pending are member ids handed out with MEMBER_ID_REQUIRED (KIP-394),
	// until when they may be used to join.
	pending map[string]time.Time
	// A rebalance (PreparingRebalance) ends at joinDeadline at the latest.
	// After an initial delay (the group was Empty) it ends only then, and
	// if a member joined meanwhile the delay starts again, within
	// delayLeft.
	joinDeadline   time.Time
	initialDelay   bool
	newMemberAdded bool
	delayLeft      time.Duration
	offsets        map[string]map[int32]committedOffset // by topic name, then partition
	joined         uint64                               // members ever added, to order them
}

// member is one member of a group.
type member struct {
	id               string
	instanceID       *string // group.instance.id of a static member
	clientID         string
	clientHost       string
	protocols        []kmsg.JoinGroupRequestProtocol // in the member's order of preference
	session          time.Duration
	rebalanceTimeout time.Duration
	expires          time.Time // when the session ends unless a heartbeat comes
	join             *waiter   // a JoinGroup waiting for the rebalance to complete
	sync             *waiter   // a SyncGroup waiting for the leader's assignment
	assignment       []byte
	order            uint64 // join order: the earliest becomes leader
}

// committedOffset is a committed offset and what came with it.
type committedOffset struct {
	offset      int64
	leaderEpoch int32
	metadata    string
}

// waiter is a JoinGroup or SyncGroup request that the coordinator answers
// later. answered is guarded by the coordinator's mutex.
type waiter struct {
	b        *broker
	req      *socketserver.Request
	group    string
	done     chan struct{} // closed when answered
	answered bool
}

// newCoordinator returns a coordinator without groups; run keeps its
// deadlines until stopping is closed.
func newCoordinator(settings groupSettings, topics *state, log *slog.Logger, stopping <-chan struct{}) *coordinator {
	return &coordinator{settings: settings, log: log.With("component", "group-coordinator"), topics: topics,
		stopping: stopping, wake: make(chan struct{}, 1), groups: map[string]*group{}}
}

// run expires sessions and ends rebalances at their deadlines, until the
// cluster stops.
func (co *coordinator) run() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := co.expire(time.Now())
		if next.IsZero() {
			timer.Reset(time.Hour) // until woken
		} else {
			timer.Reset(time.Until(next))
		}
		select {
		case <-co.stopping:
			return
		case <-co.wake:
		case <-timer.C:
		}
	}
}

// kick makes run look at the deadlines again.
func (co *coordinator) kick() {
	select {
	case co.wake <- struct{}{}:
	default:
	}
}

// expire does what is due at now: pending member ids and sessions expire,
// rebalances reach their deadline. It returns the next deadline, or zero.
func (co *coordinator) expire(now time.Time) time.Time {
	co.mu.Lock()
	defer co.mu.Unlock()
	var next time.Time
	earliest := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, g := range co.groups {
		for id, until := range g.pending {
			if !now.Before(until) {
				delete(g.pending, id)
				co.tryCompleteJoin(g, now)
			}
		}
		for _, m := range g.sortedMembers() {
			if g.members[m.id] == m && m.join == nil && m.sync == nil && !now.Before(m.expires) {
				co.removeMember(g, m, "its session timed out", now)
			}
		}
		if g.state == groupPreparingRebalance && !now.Before(g.joinDeadline) {
			co.joinDeadlinePassed(g, now)
		}
		// What is left to wait for.
		for _, until := range g.pending {
			earliest(until)
		}
		for _, m := range g.members {
			if m.join == nil && m.sync == nil {
				earliest(m.expires)
			}
		}
		if g.state == groupPreparingRebalance {
			earliest(g.joinDeadline)
		}
	}
	return next
}

// watch waits until w is answered, and answers it itself when its client
// goes away or the cluster stops.
func (co *coordinator) watch(w *waiter) {
	select {
	case <-w.done:
	case <-w.req.Context().Done():
		co.clientGone(w)
	case <-co.stopping:
		co.mu.Lock()
		co.answer(w, waiterError(w, kerr.NotCoordinator))
		co.mu.Unlock()
	}
}

// clientGone forgets w, whose connection has closed. A member whose
// JoinGroup waited leaves the group: no one would answer for it.
func (co *coordinator) clientGone(w *waiter) {
	co.mu.Lock()
	defer co.mu.Unlock()
	defer co.kick() // the member's session, or the rebalance, may end sooner
	if w.answered {
		return
	}
	w.answered = true
	close(w.done)
	_ = w.req.CloseConnection()
	g := co.groups[w.group] // groups are never deleted
	for _, m := range g.members {
		switch w {
		case m.join:
			m.join = nil
			co.removeMember(g, m, "its client disconnected while joining", time.Now())
			return
		case m.sync:
			m.sync = nil
			return
		}
	}
}

// answer answers w with resp, unless it has been answered.
func (co *coordinator) answer(w *waiter, resp kmsg.Response) {
	if w == nil || w.answered {
		return
	}
	w.answered = true
	close(w.done)
	w.b.respond(w.req, resp)
}

// waiterError returns the response to w's request for err.
func waiterError(w *waiter, err error) kmsg.Response {
	if req, ok := w.req.Body.(*kmsg.JoinGroupRequest); ok {
		return joinErrorResponse(req.MemberID, err)
	}
	return syncErrorResponse(err)
}

// joinErrorResponse is a JoinGroup response with err for memberID.
func joinErrorResponse(memberID string, err error) *kmsg.JoinGroupResponse {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.ErrorCode, resp.MemberID = errorCode(err), memberID
	return resp
}

// syncErrorResponse is a SyncGroup response with err.
func syncErrorResponse(err error) *kmsg.SyncGroupResponse {
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.ErrorCode, resp.MemberAssignment = errorCode(err), []byte{}
	return resp
}

// newGroup creates an empty group called id.
func (co *coordinator) newGroup(id string) *group {
	g := &group{id: id, members: map[string]*member{}, statics: map[string]string{}, pending: map[string]time.Time{},
		offsets: map[string]map[int32]committedOffset{}}
	co.groups[id] = g
	return g
}

// join handles a JoinGroup as Kafka's coordinator does. It answers r now,
// or returns the waiter that the end of the rebalance will answer.
func (co *coordinator) join(b *broker, r *socketserver.Request, req *kmsg.JoinGroupRequest) *waiter {
	co.mu.Lock()
	defer co.mu.Unlock()
	defer co.kick()
	now := time.Now()
	fail := func(err error) *waiter {
		b.respond(r, joinErrorResponse(req.MemberID, err))
		return nil
	}
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	if session < co.settings.minSession || session > co.settings.maxSession {
		return fail(kerr.InvalidSessionTimeout)
	}
	g := co.groups[req.Group]
	if g == nil {
		if req.MemberID != "" {
			return fail(kerr.UnknownMemberID)
		}
		g = co.newGroup(req.Group)
	}
	if !g.supports(req.ProtocolType, req.Protocols) {
		return fail(kerr.InconsistentGroupProtocol)
	}
	w := &waiter{b: b, req: r, group: g.id, done: make(chan struct{})}
	clientID := ""
	if r.ClientID != nil {
		clientID = *r.ClientID
	}
	switch _, pending := g.pending[req.MemberID]; {
	case req.MemberID == "" && req.InstanceID != nil:
		id := newMemberID(*req.InstanceID)
		old := g.members[g.statics[*req.InstanceID]]
		if old == nil {
			co.addMember(g, id, r, req, w, now)
			break
		}
		// A static member restarted: it takes the place of its old self.
		// (Kafka then skips the rebalance when nothing else changed; here
		// the usual rejoin rules apply.)
		co.answer(old.join, joinErrorResponse(old.id, kerr.FencedInstanceID))
		co.answer(old.sync, syncErrorResponse(kerr.FencedInstanceID))
		old.join, old.sync = nil, nil
		g.rename(old, id)
		co.rejoin(g, old, r, req, w, now)
	case req.MemberID == "":
		id := newMemberID(clientID)
		if req.Version >= 4 { // KIP-394: join again with this id
			g.pending[id] = now.Add(session)
			b.respond(r, joinErrorResponse(id, kerr.MemberIDRequired))
			return nil
		}
		co.addMember(g, id, r, req, w, now)
	case pending:
		delete(g.pending, req.MemberID)
		co.addMember(g, req.MemberID, r, req, w, now)
	default:
		m, err := g.member(req.MemberID, req.InstanceID)
		if err != nil {
			return fail(err)
		}
		co.rejoin(g, m, r, req, w, now)
	}
	if w.answered {
		return nil
	}
	return w
}

// newMemberID returns a new member id: prefix (the client id, or the
// instance id of a static member), a dash and a random UUID, as Kafka's.
func newMemberID(prefix string) string {
	var u [16]byte
	_, _ = rand.Read(u[:]) // never fails
	u[6], u[8] = u[6]&0x0f|0x40, u[8]&0x3f|0x80
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
}

// addMember adds a member that joins with r and waits with w, and starts or
// continues a rebalance.
func (co *coordinator) addMember(g *group, id string, r *socketserver.Request, req *kmsg.JoinGroupRequest, w *waiter, now time.Time) {
	g.joined++
	m := &member{id: id, instanceID: req.InstanceID, clientHost: "/" + r.Conn.ClientAddr.Addr().String(), order: g.joined}
	if r.ClientID != nil {
		m.clientID = *r.ClientID
	}
	m.update(req)
	m.join = w
	if len(g.members) == 0 {
		g.protocolType = req.ProtocolType
	}
	g.members[id] = m
	if m.instanceID != nil {
		g.statics[*m.instanceID] = id
	}
	if g.leader == "" {
		g.leader = id
	}
	co.log.Debug("member joins group", "group", g.id, "member", id, "client_id", m.clientID, "state", g.state)
	if g.state == groupPreparingRebalance {
		g.newMemberAdded = g.newMemberAdded || g.initialDelay
		co.tryCompleteJoin(g, now)
		return
	}
	co.prepareRebalance(g, "a new member joins", now)
}

// rejoin handles a JoinGroup of member m, which the group knows.
func (co *coordinator) rejoin(g *group, m *member, r *socketserver.Request, req *kmsg.JoinGroupRequest, w *waiter, now time.Time) {
	same := m.sameProtocols(req.Protocols)
	switch {
	case g.state == groupPreparingRebalance:
		co.awaitJoin(m, w, req)
		co.tryCompleteJoin(g, now)
	case g.state == groupCompletingRebalance && same,
		g.state == groupStable && same && m.id != g.leader:
		// The member lost the JoinGroup response, or (a follower) just
		// rejoins: it gets the current generation again.
		m.expires = now.Add(m.session)
		co.answer(w, g.joinResponse(m))
	default: // new metadata, or the leader asking for a rebalance
		co.awaitJoin(m, w, req)
		co.prepareRebalance(g, "a member rejoins with new metadata or is the leader", now)
	}
}

// awaitJoin records that m, which joins with req, waits with w.
func (co *coordinator) awaitJoin(m *member, w *waiter, req *kmsg.JoinGroupRequest) {
	if m.join != nil { // an older JoinGroup of the member, on another connection
		co.answer(m.join, joinErrorResponse(m.id, kerr.RebalanceInProgress))
	}
	m.update(req)
	m.join = w
}

// update takes the member's protocols and timeouts from req, copying the
// bytes, which belong to the request.
func (m *member) update(req *kmsg.JoinGroupRequest) {
	m.protocols = m.protocols[:0]
	for _, p := range req.Protocols {
		m.protocols = append(m.protocols, kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: bytes.Clone(p.Metadata)})
	}
	m.session = time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	m.rebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	if req.Version == 0 { // no rebalance timeout: the session's applies
		m.rebalanceTimeout = m.session
	}
}

// sameProtocols reports whether protocols are the member's.
func (m *member) sameProtocols(protocols []kmsg.JoinGroupRequestProtocol) bool {
	return slices.EqualFunc(m.protocols, protocols, func(a, b kmsg.JoinGroupRequestProtocol) bool {
		return a.Name == b.Name && bytes.Equal(a.Metadata, b.Metadata)
	})
}

// metadata returns the member's metadata for protocol.
func (m *member) metadata(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return []byte{}
}

// prepareRebalance starts a rebalance: every member must join again
// within the group's rebalance timeout. An empty group first waits
// group.initial.rebalance.delay.ms for more members.
func (co *coordinator) prepareRebalance(g *group, reason string, now time.Time) {
	if g.state == groupCompletingRebalance { // followers wait for an assignment that will not come
		for _, m := range g.members {
			co.answer(m.sync, syncErrorResponse(kerr.RebalanceInProgress))
			m.sync = nil
		}
	}
	var timeout time.Duration
	for _, m := range g.members {
		timeout = max(timeout, m.rebalanceTimeout)
	}
	if g.state == groupEmpty {
		delay := min(co.settings.initialRebalanceDelay, timeout)
		g.initialDelay, g.newMemberAdded, g.delayLeft = true, false, timeout-delay
		g.joinDeadline = now.Add(delay)
	} else {
		g.initialDelay = false
		g.joinDeadline = now.Add(timeout)
	}
	co.log.Info("group rebalances", "group", g.id, "reason", reason, "from", g.state, "generation", g.generation)
	g.state = groupPreparingRebalance
	co.tryCompleteJoin(g, now)
}

// tryCompleteJoin ends a rebalance when every member has joined, unless
// it waits for the initial delay.
func (co *coordinator) tryCompleteJoin(g *group, now time.Time) {
	if g.state != groupPreparingRebalance || g.initialDelay || len(g.pending) > 0 {
		return
	}
	for _, m := range g.members {
		if m.join == nil {
			return
		}
	}
	co.completeJoin(g, now)
}

// joinDeadlinePassed ends a rebalance at its deadline; an initial delay
// starts again if a member joined during it and time is left.
func (co *coordinator) joinDeadlinePassed(g *group, now time.Time) {
	if g.initialDelay && g.newMemberAdded && g.delayLeft > 0 {
		delay := min(co.settings.initialRebalanceDelay, g.delayLeft)
		g.newMemberAdded, g.delayLeft, g.joinDeadline = false, g.delayLeft-delay, now.Add(delay)
		return
	}
	co.completeJoin(g, now)
}

// completeJoin ends a rebalance: members that have not joined leave, the
// next generation starts with a protocol every member supports, and each
// member gets its JoinGroup response (the leader with every member's
// metadata, to assign partitions with).
func (co *coordinator) completeJoin(g *group, now time.Time) {
	for _, m := range g.sortedMembers() {
		if m.join == nil {
			co.log.Info("group member removed", "group", g.id, "member", m.id, "reason", "it did not join the rebalance in time")
			co.dropMember(g, m)
		}
	}
	g.generation++
	g.initialDelay = false
	if len(g.members) == 0 {
		g.state, g.protocol, g.leader = groupEmpty, "", ""
		co.log.Info("group is empty", "group", g.id, "generation", g.generation)
		return
	}
	g.protocol = g.chooseProtocol()
	g.state = groupCompletingRebalance
	co.log.Info("group joined", "group", g.id, "generation", g.generation, "members", len(g.members), "leader", g.leader, "protocol", g.protocol)
	for _, m := range g.sortedMembers() {
		m.assignment, m.expires = nil, now.Add(m.session)
		w := m.join
		m.join = nil
		co.answer(w, g.joinResponse(m))
	}
}

// joinResponse is the JoinGroup response of m for the current generation.
func (g *group) joinResponse(m *member) *kmsg.JoinGroupResponse {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Generation, resp.LeaderID, resp.MemberID = g.generation, g.leader, m.id
	resp.ProtocolType, resp.Protocol = kmsg.StringPtr(g.protocolType), kmsg.StringPtr(g.protocol)
	if m.id == g.leader {
		for _, o := range g.sortedMembers() {
			rm := kmsg.NewJoinGroupResponseMember()
			rm.MemberID, rm.InstanceID, rm.ProtocolMetadata = o.id, o.instanceID, o.metadata(g.protocol)
			resp.Members = append(resp.Members, rm)
		}
	}
	return resp
}

// supports reports whether a member joining with protocolType and
// protocols fits the group: it must share the type and a protocol with
// every member, or, for an empty group, name a type and a protocol.
func (g *group) supports(protocolType string, protocols []kmsg.JoinGroupRequestProtocol) bool {
	if len(g.members) == 0 {
		return protocolType != "" && len(protocols) > 0
	}
	if protocolType != g.protocolType {
		return false
	}
	return slices.ContainsFunc(protocols, func(p kmsg.JoinGroupRequestProtocol) bool { return g.allSupport(p.Name) })
}

// allSupport reports whether every member supports protocol.
func (g *group) allSupport(protocol string) bool {
	for _, m := range g.members {
		if !slices.ContainsFunc(m.protocols, func(p kmsg.JoinGroupRequestProtocol) bool { return p.Name == protocol }) {
			return false
		}
	}
	return true
}

// chooseProtocol returns the protocol of the generation, as Kafka chooses
// it: each member votes for the first of its protocols that every member
// supports, and the most votes win (ties go to the leader's preference).
func (g *group) chooseProtocol() string {
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if g.allSupport(p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := ""
	for _, p := range g.members[g.leader].protocols {
		if votes[p.Name] > votes[best] {
			best = p.Name
		}
	}
	return best
}

// sortedMembers returns the members in the order they joined.
func (g *group) sortedMembers() []*member {
	out := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *member) int { return cmp.Compare(a.order, b.order) })
	return out
}

// member returns the member with id (and instanceID, for a static member),
// or UNKNOWN_MEMBER_ID, or FENCED_INSTANCE_ID when the instance id belongs
// to another member id.
func (g *group) member(id string, instanceID *string) (*member, error) {
	if instanceID != nil {
		switch known, ok := g.statics[*instanceID]; {
		case !ok:
			return nil, kerr.UnknownMemberID
		case known != id:
			return nil, kerr.FencedInstanceID
		}
	}
	m := g.members[id]
	if m == nil {
		return nil, kerr.UnknownMemberID
	}
	return m, nil
}

// rename gives member m the id to, as a restarted static member.
func (g *group) rename(m *member, to string) {
	delete(g.members, m.id)
	if g.leader == m.id {
		g.leader = to
	}
	m.id = to
	g.members[to] = m
	g.statics[*m.instanceID] = to
}

// dropMember removes m from g, failing its waiting requests with
// UNKNOWN_MEMBER_ID, and chooses a new leader if m led; the group's state
// stays.
func (co *coordinator) dropMember(g *group, m *member) {
	co.answer(m.join, joinErrorResponse(m.id, kerr.UnknownMemberID))
	co.answer(m.sync, syncErrorResponse(kerr.UnknownMemberID))
	m.join, m.sync = nil, nil
	delete(g.members, m.id)
	if m.instanceID != nil {
		delete(g.statics, *m.instanceID)
	}
	if g.leader != m.id {
		return
	}
	g.leader = ""
	for _, o := range g.sortedMembers() { // the earliest of those rejoining, else the earliest
		if g.leader == "" || o.join != nil && g.members[g.leader].join == nil {
			g.leader = o.id
		}
	}
}

// removeMember removes m from g and rebalances the others.
func (co *coordinator) removeMember(g *group, m *member, reason string, now time.Time) {
	co.log.Info("group member removed", "group", g.id, "member", m.id, "reason", reason)
	co.dropMember(g, m)
	switch g.state {
	case groupStable, groupCompletingRebalance:
		co.prepareRebalance(g, "a member left", now)
	case groupPreparingRebalance:
		co.tryCompleteJoin(g, now)
	}
}

// sync handles a SyncGroup. It answers r now, or returns the waiter that
// the leader's SyncGroup will answer.
func (co *coordinator) sync(b *broker, r *socketserver.Request, req *kmsg.SyncGroupRequest) *waiter {
	co.mu.Lock()
	defer co.mu.Unlock()
	defer co.kick() // sessions of members that no longer wait count again
	var err error = kerr.UnknownMemberID
	var m *member
	g := co.groups[req.Group]
	if g != nil {
		m, err = g.member(req.MemberID, req.InstanceID)
	}
	switch {
	case err != nil:
	case req.Generation != g.generation:
		err = kerr.IllegalGeneration
	case req.ProtocolType != nil && *req.ProtocolType != g.protocolType, req.Protocol != nil && *req.Protocol != g.protocol:
		err = kerr.InconsistentGroupProtocol
	case g.state == groupPreparingRebalance:
		err = kerr.RebalanceInProgress
	}
	if err != nil {
		b.respond(r, syncErrorResponse(err))
		return nil
	}
	m.expires = time.Now().Add(m.session)
	if g.state == groupStable {
		b.respond(r, g.syncResponse(m))
		return nil
	}
	// CompletingRebalance: wait for the leader's assignment, or bring it.
	w := &waiter{b: b, req: r, group: g.id, done: make(chan struct{})}
	co.answer(m.sync, syncErrorResponse(kerr.RebalanceInProgress)) // an older SyncGroup, on another connection
	m.sync = w
	if m.id != g.leader {
		return w
	}
	for _, a := range req.GroupAssignment {
		if o := g.members[a.MemberID]; o != nil {
			o.assignment = bytes.Clone(a.MemberAssignment)
		}
	}
	g.state = groupStable
	co.log.Info("group stable", "group", g.id, "generation", g.generation)
	for _, o := range g.members {
		if o.sync != nil {
			co.answer(o.sync, g.syncResponse(o))
			o.sync = nil
		}
	}
	return nil
}

// syncResponse is m's SyncGroup response: its assignment.
func (g *group) syncResponse(m *member) *kmsg.SyncGroupResponse {
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.ProtocolType, resp.Protocol = kmsg.StringPtr(g.protocolType), kmsg.StringPtr(g.protocol)
	resp.MemberAssignment = m.assignment
	if resp.MemberAssignment == nil {
		resp.MemberAssignment = []byte{}
	}
	return resp
}

// heartbeat keeps a member's session alive; during a rebalance it answers
// REBALANCE_IN_PROGRESS, so that the member joins again.
func (co *coordinator) heartbeat(req *kmsg.HeartbeatRequest) error {
	co.mu.Lock()
	defer co.mu.Unlock()
	g := co.groups[req.Group]
	if g == nil {
		return kerr.UnknownMemberID
	}
	m, err := g.member(req.MemberID, req.InstanceID)
	switch {
	case err != nil:
		return err
	case req.Generation != g.generation:
		return kerr.IllegalGeneration
	}
	m.expires = time.Now().Add(m.session)
	if g.state == groupPreparingRebalance {
		return kerr.RebalanceInProgress
	}
	return nil
}

// leave removes members from a group: one member id (v0-v2), or members by
// id or instance id (v3+), each with its own error.
func (co *coordinator) leave(req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	co.mu.Lock()
	defer co.mu.Unlock()
	defer co.kick()
	resp := kmsg.NewPtrLeaveGroupResponse()
	g := co.groups[req.Group]
	if g == nil {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp
	}
	leaving := req.Members
	if req.Version < 3 {
		leaving = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	now := time.Now()
	for _, lm := range leaving {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = lm.MemberID, lm.InstanceID
		rm.ErrorCode = errorCode(co.leaveOne(g, lm.MemberID, lm.InstanceID, now))
		resp.Members = append(resp.Members, rm)
	}
	if req.Version < 3 {
		resp.ErrorCode, resp.Members = resp.Members[0].ErrorCode, nil
	}
	return resp
}

// leaveOne removes one member from g: by member id, or by instance id alone
// (an admin removing a static member).
func (co *coordinator) leaveOne(g *group, id string, instanceID *string, now time.Time) error {
	if _, ok := g.pending[id]; ok && instanceID == nil {
		delete(g.pending, id)
		co.tryCompleteJoin(g, now)
		return nil
	}
	if id == "" && instanceID != nil {
		id = g.statics[*instanceID]
	}
	m, err := g.member(id, instanceID)
	if err != nil {
		return err
	}
	co.removeMember(g, m, "it left the group", now)
	return nil
}

// commit stores offsets when the committer may: a member of the current
// generation, or anyone (generation -1) while the group has no members.
// groupErr, when not nil, fails every partition.
func (co *coordinator) commit(req *kmsg.OffsetCommitRequest, groupErr error) *kmsg.OffsetCommitResponse {
	co.mu.Lock()
	defer co.mu.Unlock()
	err := groupErr
	g := co.groups[req.Group]
	switch {
	case err != nil:
	case g != nil:
		err = g.commitError(req.MemberID, req.InstanceID, req.Generation)
	case req.Generation < 0: // offsets only: a simple consumer, or an admin
		g = co.newGroup(req.Group)
	case req.Version >= 9:
		err = kerr.GroupIDNotFound
	default:
		err = kerr.IllegalGeneration
	}
	byID := req.Version >= 10
	resp := kmsg.NewPtrOffsetCommitResponse()
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		t := co.topic(rt.Topic, rt.TopicID, byID)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			perr := err
			if perr == nil {
				perr = offsetPartitionError(t, rp.Partition, byID)
			}
			if perr == nil && rp.Metadata != nil && len(*rp.Metadata) > maxOffsetMetadata {
				perr = kerr.OffsetMetadataTooLarge
			}
			if perr == nil {
				if g.offsets[t.name] == nil {
					g.offsets[t.name] = map[int32]committedOffset{}
				}
				metadata := ""
				if rp.Metadata != nil {
					metadata = strings.Clone(*rp.Metadata)
				}
				g.offsets[t.name][rp.Partition] = committedOffset{offset: rp.Offset, leaderEpoch: rp.LeaderEpoch, metadata: metadata}
			}
			sp.ErrorCode = errorCode(perr)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// commitError says why a commit by memberID (instanceID) for generation is
// refused, nil if it is not.
func (g *group) commitError(memberID string, instanceID *string, generation int32) error {
	if generation < 0 && g.state == groupEmpty {
		return nil
	}
	if generation >= 0 || memberID != "" || instanceID != nil {
		if _, err := g.member(memberID, instanceID); err != nil {
			return err
		}
		if generation != g.generation {
			return kerr.IllegalGeneration
		}
	} else if g.state != groupEmpty {
		return kerr.UnknownMemberID
	}
	if g.state == groupCompletingRebalance { // the member has a generation but no assignment yet
		return kerr.RebalanceInProgress
	}
	return nil
}

// deleteTopic deletes t from the state and the committed offsets of its
// partitions from every group, as Kafka's group coordinator does when a
// topic is deleted. Both happen under the coordinator's lock, so that no
// commit can store an offset for t in between.
func (co *coordinator) deleteTopic(t *topic) error {
	co.mu.Lock()
	defer co.mu.Unlock()
	if err := co.topics.deleteTopic(t); err != nil {
		return err
	}
	for _, g := range co.groups {
		delete(g.offsets, t.name)
	}
	return nil
}

// topic finds a topic by id (byID) or by name; nil when there is none.
func (co *coordinator) topic(name string, id [16]byte, byID bool) *topic {
	if byID {
		return co.topics.topicByID(id)
	}
	return co.topics.topic(name)
}

// offsetPartitionError says why offsets cannot be kept for partition p of
// t: it does not exist.
func offsetPartitionError(t *topic, p int32, byID bool) error {
	switch {
	case t == nil && byID:
		return kerr.UnknownTopicID
	case t == nil || p < 0 || int(p) >= len(t.partitions):
		return kerr.UnknownTopicOrPartition
	}
	return nil
}

// wantedOffsets are the partitions of a topic (by name, or by id in v10+)
// that an OffsetFetch asks for.
type wantedOffsets struct {
	topic      string
	id         [16]byte
	partitions []int32
}

// offsets returns the committed offsets of group id: those of want, or
// every one when all. A partition without one gets offset -1.
func (co *coordinator) offsets(id string, want []wantedOffsets, all, byID bool) []kmsg.OffsetFetchResponseGroupTopic {
	co.mu.Lock()
	defer co.mu.Unlock()
	var committed map[string]map[int32]committedOffset
	if g := co.groups[id]; g != nil {
		committed = g.offsets
	}
	if all {
		want = nil
		for _, name := range slices.Sorted(maps.Keys(committed)) {
			w := wantedOffsets{topic: name, partitions: slices.Sorted(maps.Keys(committed[name]))}
			if t := co.topics.topic(name); t != nil {
				w.id = t.id
			}
			want = append(want, w)
		}
	}
	var out []kmsg.OffsetFetchResponseGroupTopic
	for _, w := range want {
		st := kmsg.NewOffsetFetchResponseGroupTopic()
		st.Topic, st.TopicID = w.topic, w.id
		var err error
		if byID && !all {
			if t := co.topics.topicByID(w.id); t != nil {
				w.topic = t.name
			} else {
				err = kerr.UnknownTopicID
			}
		}
		for _, p := range w.partitions {
			sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			sp.Partition, sp.Offset, sp.LeaderEpoch, sp.Metadata = p, -1, -1, kmsg.StringPtr("")
			if c, ok := committed[w.topic][p]; ok && err == nil {
				sp.Offset, sp.LeaderEpoch, sp.Metadata = c.offset, c.leaderEpoch, kmsg.StringPtr(c.metadata)
			}
			sp.ErrorCode = errorCode(err)
			st.Partitions = append(st.Partitions, sp)
		}
		out = append(out, st)
	}
	return out
}

// offsetErrors answers every partition of want with err.
func offsetErrors(want []wantedOffsets, err error) []kmsg.OffsetFetchResponseGroupTopic {
	var out []kmsg.OffsetFetchResponseGroupTopic
	for _, w := range want {
		st := kmsg.NewOffsetFetchResponseGroupTopic()
		st.Topic = w.topic
		for _, p := range w.partitions {
			sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			sp.Partition, sp.Offset, sp.LeaderEpoch, sp.ErrorCode = p, -1, -1, errorCode(err)
			st.Partitions = append(st.Partitions, sp)
		}
		out = append(out, st)
	}
	return out
}

// describe fills dg, which names a group, as Kafka does: members with
// their metadata and assignment only once the group is Stable; an unknown
// group is Dead (v0-v5) or GROUP_ID_NOT_FOUND (v6+).
func (co *coordinator) describe(dg *kmsg.DescribeGroupsResponseGroup, version int16) {
	co.mu.Lock()
	defer co.mu.Unlock()
	g := co.groups[dg.Group]
	if g == nil {
		dg.State = "Dead"
		if version >= 6 {
			err := fmt.Errorf("%w: group %s", kerr.GroupIDNotFound, dg.Group)
			dg.ErrorCode, dg.ErrorMessage = errorCode(err), kmsg.StringPtr(err.Error())
		}
		return
	}
	dg.State, dg.ProtocolType = g.state.String(), g.protocolType
	stable := g.state == groupStable
	if stable {
		dg.Protocol = g.protocol
	}
	for _, m := range g.sortedMembers() {
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID, dm.InstanceID, dm.ClientID, dm.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
		dm.ProtocolMetadata, dm.MemberAssignment = []byte{}, []byte{}
		if stable {
			dm.ProtocolMetadata, dm.MemberAssignment = m.metadata(g.protocol), m.assignment
		}
		dg.Members = append(dg.Members, dm)
	}
}

// list returns the groups that mine accepts, in the states and of the types
// asked for (every one when a filter is empty; all groups are "classic").
func (co *coordinator) list(mine func(id string) bool, states, types []string) []kmsg.ListGroupsResponseGroup {
	co.mu.Lock()
	defer co.mu.Unlock()
	wanted := func(filter []string, value string) bool {
		return len(filter) == 0 || slices.ContainsFunc(filter, func(f string) bool { return strings.EqualFold(f, value) })
	}
	var out []kmsg.ListGroupsResponseGroup
	for _, id := range slices.Sorted(maps.Keys(co.groups)) {
		g := co.groups[id]
		if !mine(id) || !wanted(states, g.state.String()) || !wanted(types, "classic") {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = id, g.protocolType, g.state.String(), "classic"
		out = append(out, lg)
	}
	return out
}
