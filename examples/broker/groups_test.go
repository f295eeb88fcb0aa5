package main

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/kafkanet/kafkanet/config"
)

// groupSets make rebalances fast for tests: no initial delay, and session
// timeouts from 100 ms.
var groupSets = []string{"group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=100"}

// groupMember is a kgo consumer-group member that polls in the background
// and tracks the partitions it owns.
type groupMember struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	mu    sync.Mutex
	owned map[int32]bool
}

// startMember starts a member of group consuming topic; it leaves the group
// when the test ends, or earlier with close.
func startMember(t *testing.T, bootstrap, group, topic string, opts ...kgo.Opt) *groupMember {
	t.Helper()
	m := &groupMember{owned: map[int32]bool{}, done: make(chan struct{})}
	track := func(add bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range parts[topic] {
				if add {
					m.owned[p] = true
				} else {
					delete(m.owned, p)
				}
			}
		}
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(bootstrap), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.HeartbeatInterval(100 * time.Millisecond), kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.OnPartitionsAssigned(track(true)), kgo.OnPartitionsRevoked(track(false)), kgo.OnPartitionsLost(track(false)),
	}, opts...)...)
	require.NoError(t, err)
	m.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			m.cl.PollFetches(ctx)
		}
	}()
	t.Cleanup(m.close)
	return m
}

// close stops polling and closes the client, which leaves the group.
func (m *groupMember) close() {
	m.once.Do(func() {
		m.cancel()
		<-m.done
		m.cl.Close()
	})
}

// partitions returns the partitions m owns, sorted.
func (m *groupMember) partitions() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int32
	for p := range m.owned {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// groupSnapshot is what the coordinator holds about a group, for tests.
type groupSnapshot struct {
	exists      bool
	state       groupState
	generation  int32
	members     int
	joinWaiting int // members whose JoinGroup waits
	syncWaiting int // members whose SyncGroup waits
}

// snapshot returns what c's coordinator holds about group id.
func snapshot(c *cluster, id string) groupSnapshot {
	c.groups.mu.Lock()
	defer c.groups.mu.Unlock()
	g := c.groups.groups[id]
	if g == nil {
		return groupSnapshot{}
	}
	s := groupSnapshot{exists: true, state: g.state, generation: g.generation, members: len(g.members)}
	for _, m := range g.members {
		if m.join != nil {
			s.joinWaiting++
		}
		if m.sync != nil {
			s.syncWaiting++
		}
	}
	return s
}

func TestGroupKgoMembersSplitPartitionsAndRebalanceOnLeave(t *testing.T) {
	all := []int32{0, 1, 2, 3, 4, 5}
	for _, tc := range []struct {
		name     string
		balancer kgo.GroupBalancer
	}{
		{"cooperative-sticky", kgo.CooperativeStickyBalancer()},
		{"range", kgo.RangeBalancer()},
		{"round-robin", kgo.RoundRobinBalancer()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startTestCluster(t, 1, groupSets...)
			bootstrap := addr(t, c, 0, "CLIENT")
			createTopic(t, dialRaw(t, bootstrap), "events", int32(len(all)))

			a := startMember(t, bootstrap, "split", "events", kgo.Balancers(tc.balancer))
			b := startMember(t, bootstrap, "split", "events", kgo.Balancers(tc.balancer))
			require.Eventually(t, func() bool {
				pa, pb := a.partitions(), b.partitions()
				union := slices.Sorted(slices.Values(append(slices.Clone(pa), pb...)))
				return len(pa) > 0 && len(pb) > 0 && slices.Equal(union, all) // equal lengths: disjoint
			}, 20*time.Second, 20*time.Millisecond, "two members should split the partitions")
			s := snapshot(c, "split")
			require.Equal(t, groupStable, s.state)
			require.Equal(t, 2, s.members)

			b.close() // LeaveGroup
			require.Eventually(t, func() bool { return slices.Equal(a.partitions(), all) },
				20*time.Second, 20*time.Millisecond, "the remaining member should own every partition")
			require.Eventually(t, func() bool { s := snapshot(c, "split"); return s.state == groupStable && s.members == 1 },
				5*time.Second, 20*time.Millisecond)
		})
	}
}

func TestGroupNewMemberResumesFromCommittedOffset(t *testing.T) {
	c := startTestCluster(t, 1, groupSets...)
	bootstrap := addr(t, c, 0, "CLIENT")
	conn := dialRaw(t, bootstrap)
	createTopic(t, conn, "orders", 1)
	var values []string
	for i := range 10 {
		values = append(values, "v"+strconv.Itoa(i))
	}
	produced := roundTrip[*kmsg.ProduceResponse](conn, produceRequest(-1, "orders", 0, values...))
	require.Zero(t, produced.Topics[0].Partitions[0].ErrorCode)

	opts := []kgo.Opt{
		kgo.SeedBrokers(bootstrap), kgo.ConsumerGroup("resume"), kgo.ConsumeTopics("orders"), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100 * time.Millisecond),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first, err := kgo.NewClient(opts...)
	require.NoError(t, err)
	var got []*kgo.Record
	for len(got) < 4 {
		fetches := first.PollRecords(ctx, 4-len(got))
		require.NoError(t, ctx.Err())
		got = append(got, fetches.Records()...)
	}
	require.Equal(t, int64(3), got[3].Offset)
	require.NoError(t, first.CommitRecords(ctx, got...))
	first.Close() // leaves the group

	// The commit is in the group, whichever version asks.
	for _, version := range []int16{1, 7, 9} {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version, req.Group = version, "resume"
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = "orders", []int32{0}
		req.Topics = append(req.Topics, rt)
		if version >= 8 {
			rg := kmsg.NewOffsetFetchRequestGroup()
			rg.Group = "resume"
			rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "orders", Partitions: []int32{0}}}
			req.Groups, req.Topics = append(req.Groups, rg), nil
		}
		resp := roundTrip[*kmsg.OffsetFetchResponse](conn, req)
		var offset int64
		if version >= 8 {
			offset = resp.Groups[0].Topics[0].Partitions[0].Offset
		} else {
			offset = resp.Topics[0].Partitions[0].Offset
		}
		require.Equal(t, int64(4), offset, "OffsetFetch v%d", version)
	}

	second := newClient(t, bootstrap, opts[1:]...)
	var next []*kgo.Record
	for len(next) == 0 {
		next = second.PollRecords(ctx, 1).Records()
		require.NoError(t, ctx.Err())
	}
	require.Equal(t, int64(4), next[0].Offset, "the new member should resume after the commit")
	require.Equal(t, "v4", string(next[0].Value))
}

func TestGroupCoordinatorAmongThreeBrokers(t *testing.T) {
	c := startTestCluster(t, 3, groupSets...)
	// A group coordinated by a broker other than the seed broker 0.
	group := ""
	for i := 0; group == ""; i++ {
		if id := "g-" + strconv.Itoa(i); c.coordinatorOf(id) != c.brokers[0].id {
			group = id
		}
	}
	coordID := c.coordinatorOf(group)
	coord := int(coordID - c.brokers[0].id)
	other := (coord + 1) % 3
	coordAddr := addr(t, c, coord, "CLIENT")

	t.Run("FindCoordinator", func(t *testing.T) {
		conn := dialRaw(t, addr(t, c, 0, "CLIENT"))
		for version := int16(0); version <= 6; version++ {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.Version, req.CoordinatorKey, req.CoordinatorKeys = version, group, []string{group}
			resp := roundTrip[*kmsg.FindCoordinatorResponse](conn, req)
			node, host, port, code := resp.NodeID, resp.Host, resp.Port, resp.ErrorCode
			if version >= 4 {
				require.Len(t, resp.Coordinators, 1)
				rc := resp.Coordinators[0]
				require.Equal(t, group, rc.Key)
				node, host, port, code = rc.NodeID, rc.Host, rc.Port, rc.ErrorCode
			}
			require.Zero(t, code, "v%d", version)
			require.Equal(t, coordID, node, "v%d", version)
			require.Equal(t, coordAddr, net.JoinHostPort(host, strconv.Itoa(int(port))), "v%d", version)
		}

		// Batched keys, each with its own coordinator.
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version = 4
		for i := range 20 {
			req.CoordinatorKeys = append(req.CoordinatorKeys, "batch-"+strconv.Itoa(i))
		}
		resp := roundTrip[*kmsg.FindCoordinatorResponse](conn, req)
		require.Len(t, resp.Coordinators, 20)
		seen := map[int32]bool{}
		for i, rc := range resp.Coordinators {
			require.Equal(t, req.CoordinatorKeys[i], rc.Key)
			require.Zero(t, rc.ErrorCode)
			require.Equal(t, c.coordinatorOf(rc.Key), rc.NodeID)
			seen[rc.NodeID] = true
		}
		require.Len(t, seen, 3, "20 groups should spread over the 3 brokers")

		// No transaction coordinator.
		for _, version := range []int16{1, 4} {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.Version, req.CoordinatorType, req.CoordinatorKey, req.CoordinatorKeys = version, 1, "txn", []string{"txn"}
			resp := roundTrip[*kmsg.FindCoordinatorResponse](conn, req)
			code := resp.ErrorCode
			if version >= 4 {
				code = resp.Coordinators[0].ErrorCode
			}
			require.Equal(t, kerr.InvalidRequest.Code, code, "v%d", version)
		}
	})

	t.Run("NOT_COORDINATOR", func(t *testing.T) {
		conn := dialRaw(t, addr(t, c, other, "CLIENT"))
		notCoord := kerr.NotCoordinator.Code
		require.Equal(t, notCoord, roundTrip[*kmsg.JoinGroupResponse](conn, joinRequest(9, group, "", time.Second)).ErrorCode)
		require.Equal(t, notCoord, roundTrip[*kmsg.SyncGroupResponse](conn, syncRequest(5, group, "m", 1, nil)).ErrorCode)
		require.Equal(t, notCoord, roundTrip[*kmsg.HeartbeatResponse](conn, heartbeatRequest(4, group, "m", 1)).ErrorCode)
		leave := kmsg.NewPtrLeaveGroupRequest()
		leave.Version, leave.Group, leave.Members = 5, group, []kmsg.LeaveGroupRequestMember{{MemberID: "m"}}
		require.Equal(t, notCoord, roundTrip[*kmsg.LeaveGroupResponse](conn, leave).ErrorCode)
		commit := roundTrip[*kmsg.OffsetCommitResponse](conn, commitRequest(8, group, "", -1, "t", 0, 1))
		require.Equal(t, notCoord, commit.Topics[0].Partitions[0].ErrorCode)
		v1 := roundTrip[*kmsg.OffsetFetchResponse](conn, offsetFetchRequest(1, group, "t", 0))
		require.Equal(t, notCoord, v1.Topics[0].Partitions[0].ErrorCode, "v1 has only partition errors")
		require.Equal(t, notCoord, roundTrip[*kmsg.OffsetFetchResponse](conn, offsetFetchRequest(7, group, "t", 0)).ErrorCode)
		require.Equal(t, notCoord, roundTrip[*kmsg.OffsetFetchResponse](conn, offsetFetchRequest(8, group, "t", 0)).Groups[0].ErrorCode)
		describe := kmsg.NewPtrDescribeGroupsRequest()
		describe.Version, describe.Groups = 5, []string{group}
		require.Equal(t, notCoord, roundTrip[*kmsg.DescribeGroupsResponse](conn, describe).Groups[0].ErrorCode)
	})

	t.Run("kgo", func(t *testing.T) {
		bootstrap := addr(t, c, 0, "CLIENT")
		createTopic(t, dialRaw(t, bootstrap), "spread", 3)
		producer := newClient(t, bootstrap, kgo.DefaultProduceTopic("spread"))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		const n = 30
		for i := range n {
			r := &kgo.Record{Key: []byte("k" + strconv.Itoa(i)), Value: []byte("r" + strconv.Itoa(i))}
			require.NoError(t, producer.ProduceSync(ctx, r).FirstErr())
		}
		consumer := newClient(t, bootstrap, kgo.ConsumerGroup(group), kgo.ConsumeTopics("spread"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.FetchMaxWait(100*time.Millisecond))
		got := 0
		for got < n {
			fetches := consumer.PollFetches(ctx)
			require.NoError(t, ctx.Err())
			got += len(fetches.Records())
		}
		require.Equal(t, n, got)
		require.NoError(t, consumer.CommitUncommittedOffsets(ctx))

		// The coordinator holds the commits: n records in all.
		conn := dialRaw(t, coordAddr)
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 8
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = group // Topics null: every committed offset
		req.Groups = append(req.Groups, rg)
		resp := roundTrip[*kmsg.OffsetFetchResponse](conn, req)
		require.Zero(t, resp.Groups[0].ErrorCode)
		var committed int64
		for _, rt := range resp.Groups[0].Topics {
			for _, rp := range rt.Partitions {
				committed += rp.Offset
			}
		}
		require.Equal(t, int64(n), committed)
		s := snapshot(c, group)
		require.Equal(t, groupStable, s.state)
		require.Equal(t, 1, s.members)
	})
}

// joinRequest returns a JoinGroup request of protocol type consumer with
// one protocol, range, and a rebalance timeout of 10 s.
func joinRequest(version int16, group, memberID string, session time.Duration) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version, req.Group, req.MemberID = version, group, memberID
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = int32(session/time.Millisecond), 10_000
	req.ProtocolType = "consumer"
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("subscription")}}
	return req
}

// syncRequest returns a SyncGroup request with assignments (member id to
// assignment), as the leader sends them.
func syncRequest(version int16, group, memberID string, generation int32, assignments map[string]string) *kmsg.SyncGroupRequest {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version, req.Group, req.MemberID, req.Generation = version, group, memberID, generation
	for _, id := range slices.Sorted(maps.Keys(assignments)) {
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: []byte(assignments[id])})
	}
	return req
}

// heartbeatRequest returns a Heartbeat request.
func heartbeatRequest(version int16, group, memberID string, generation int32) *kmsg.HeartbeatRequest {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version, req.Group, req.MemberID, req.Generation = version, group, memberID, generation
	return req
}

// commitRequest commits offset for one partition.
func commitRequest(version int16, group, memberID string, generation int32, topic string, partition int32, offset int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation = version, group, memberID, generation
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// offsetFetchRequest asks for the committed offsets of partitions of one
// topic, in the v8+ layout from v8 on.
func offsetFetchRequest(version int16, group, topic string, partitions ...int32) *kmsg.OffsetFetchRequest {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = version
	if version >= 8 {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = group
		rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: topic, Partitions: partitions}}
		req.Groups = append(req.Groups, rg)
		return req
	}
	req.Group = group
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: partitions}}
	return req
}

// joinNew joins group as a new member, through MEMBER_ID_REQUIRED for
// v4+, and returns the response once the rebalance completes.
func joinNew(t *testing.T, conn *rawConn, version int16, group string, session time.Duration) *kmsg.JoinGroupResponse {
	t.Helper()
	resp := roundTrip[*kmsg.JoinGroupResponse](conn, joinRequest(version, group, "", session))
	if version >= 4 {
		require.Equal(t, kerr.MemberIDRequired.Code, resp.ErrorCode)
		resp = roundTrip[*kmsg.JoinGroupResponse](conn, joinRequest(version, group, resp.MemberID, session))
	}
	require.Zero(t, resp.ErrorCode, "join: %v", kerr.ErrorForCode(resp.ErrorCode))
	return resp
}

// stableMember joins group alone and syncs, and returns its member id and
// generation.
func stableMember(t *testing.T, conn *rawConn, group string, session time.Duration) (string, int32) {
	t.Helper()
	j := joinNew(t, conn, 5, group, session)
	require.Equal(t, j.MemberID, j.LeaderID)
	s := roundTrip[*kmsg.SyncGroupResponse](conn, syncRequest(3, group, j.MemberID, j.Generation, map[string]string{j.MemberID: "all"}))
	require.Zero(t, s.ErrorCode)
	require.Equal(t, "all", string(s.MemberAssignment))
	return j.MemberID, j.Generation
}

func TestGroupMemberIDRequired(t *testing.T) {
	c := startTestCluster(t, 1, groupSets...)
	conn := dialRaw(t, addr(t, c, 0, "CLIENT"))
	for version := int16(0); version <= 9; version++ {
		t.Run("v"+strconv.Itoa(int(version)), func(t *testing.T) {
			group := "required-" + strconv.Itoa(int(version))
			first := roundTrip[*kmsg.JoinGroupResponse](conn, joinRequest(version, group, "", time.Second))
			if version < 4 { // no KIP-394: the member joins at once
				require.Zero(t, first.ErrorCode)
				require.Equal(t, first.MemberID, first.LeaderID)
				require.Equal(t, int32(1), first.Generation)
				return
			}
			require.Equal(t, kerr.MemberIDRequired.Code, first.ErrorCode)
			require.Regexp(t, `^test-[0-9a-f-]{36}$`, first.MemberID, "client id, dash, UUID")
			require.Equal(t, 0, snapshot(c, group).members, "a pending member is not a member yet")
			joined := roundTrip[*kmsg.JoinGroupResponse](conn, joinRequest(version, group, first.MemberID, time.Second))
			require.Zero(t, joined.ErrorCode)
			require.Equal(t, first.MemberID, joined.MemberID)
			require.Equal(t, first.MemberID, joined.LeaderID)
			require.Len(t, joined.Members, 1)
			require.Equal(t, "subscription", string(joined.Members[0].ProtocolMetadata))
			if version >= 7 {
				require.Equal(t, "consumer", *joined.ProtocolType)
			}
			require.Equal(t, "range", *joined.Protocol)
		})
	}
}

func TestGroupRequestErrors(t *testing.T) {
	c := startTestCluster(t, 1, groupSets...)
	conn := dialRaw(t, addr(t, c, 0, "CLIENT"))
	createTopic(t, conn, "t", 2)
	member, gen := stableMember(t, conn, "errors", 5*time.Second)
	code := func(err error) int16 { return errorCode(err) }
	for _, tc := range []struct {
		name string
		req  kmsg.Request
		want error
	}{
		{"JoinGroup unknown member", joinRequest(5, "errors", "nobody", 5*time.Second), kerr.UnknownMemberID},
		{"JoinGroup unknown member of an unknown group", joinRequest(5, "no-such-group", "nobody", 5*time.Second), kerr.UnknownMemberID},
		{"JoinGroup session below the minimum", joinRequest(5, "errors", "", 50*time.Millisecond), kerr.InvalidSessionTimeout},
		{"JoinGroup empty group id", joinRequest(5, "", "", 5*time.Second), kerr.InvalidGroupID},
		{"JoinGroup other protocol type", func() kmsg.Request {
			r := joinRequest(5, "errors", member, 5*time.Second)
			r.ProtocolType = "connect"
			return r
		}(), kerr.InconsistentGroupProtocol},
		{"JoinGroup no protocol in common", func() kmsg.Request {
			r := joinRequest(3, "errors", "", 5*time.Second)
			r.Protocols[0].Name = "roundrobin"
			return r
		}(), kerr.InconsistentGroupProtocol},
		{"SyncGroup unknown member", syncRequest(3, "errors", "nobody", gen, nil), kerr.UnknownMemberID},
		{"SyncGroup old generation", syncRequest(3, "errors", member, gen-1, nil), kerr.IllegalGeneration},
		{"SyncGroup other protocol (v5)", func() kmsg.Request {
			r := syncRequest(5, "errors", member, gen, nil)
			r.Protocol = kmsg.StringPtr("sticky")
			return r
		}(), kerr.InconsistentGroupProtocol},
		{"Heartbeat unknown member", heartbeatRequest(4, "errors", "nobody", gen), kerr.UnknownMemberID},
		{"Heartbeat unknown group", heartbeatRequest(0, "no-such-group", "nobody", 0), kerr.UnknownMemberID},
		{"Heartbeat next generation", heartbeatRequest(4, "errors", member, gen+1), kerr.IllegalGeneration},
		{"Heartbeat", heartbeatRequest(0, "errors", member, gen), nil},
		{"OffsetCommit unknown member", commitRequest(8, "errors", "nobody", gen, "t", 0, 1), kerr.UnknownMemberID},
		{"OffsetCommit old generation", commitRequest(8, "errors", member, gen-1, "t", 0, 1), kerr.IllegalGeneration},
		{"OffsetCommit generation -1 while the group has members", commitRequest(2, "errors", "", -1, "t", 0, 1), kerr.UnknownMemberID},
		{"OffsetCommit unknown group, generation 3 (v8)", commitRequest(8, "no-such-group", "m", 3, "t", 0, 1), kerr.IllegalGeneration},
		{"OffsetCommit unknown group, generation 3 (v9)", commitRequest(9, "no-such-group", "m", 3, "t", 0, 1), kerr.GroupIDNotFound},
		{"OffsetCommit unknown partition", commitRequest(8, "errors", member, gen, "t", 2, 1), kerr.UnknownTopicOrPartition},
		{"OffsetCommit unknown topic", commitRequest(8, "errors", member, gen, "nope", 0, 1), kerr.UnknownTopicOrPartition},
		{"OffsetCommit", commitRequest(8, "errors", member, gen, "t", 1, 7), nil},
		{"LeaveGroup unknown member (v0)", func() kmsg.Request {
			r := kmsg.NewPtrLeaveGroupRequest()
			r.Group, r.MemberID = "errors", "nobody"
			return r
		}(), kerr.UnknownMemberID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := roundTrip[kmsg.Response](conn, tc.req)
			var got int16
			switch resp := resp.(type) {
			case *kmsg.JoinGroupResponse:
				got = resp.ErrorCode
			case *kmsg.SyncGroupResponse:
				got = resp.ErrorCode
			case *kmsg.HeartbeatResponse:
				got = resp.ErrorCode
			case *kmsg.LeaveGroupResponse:
				got = resp.ErrorCode
			case *kmsg.OffsetCommitResponse:
				got = resp.Topics[0].Partitions[0].ErrorCode
			}
			require.Equal(t, code(tc.want), got, "got %v", kerr.ErrorForCode(got))
		})
	}
	s := snapshot(c, "errors")
	require.Equal(t, groupStable, s.state, "no error should have changed the group")
	require.Equal(t, 1, s.members)
	require.Equal(t, gen, s.generation)
}

func TestGroupRebalanceInProgress(t *testing.T) {
	c := startTestCluster(t, 1, groupSets...)
	bootstrap := addr(t, c, 0, "CLIENT")
	connA, connB := dialRaw(t, bootstrap), dialRaw(t, bootstrap)
	createTopic(t, connA, "t", 1)
	a, gen := stableMember(t, connA, "busy", 10*time.Second)

	// B joins: the group rebalances, and B's JoinGroup waits for A.
	first := roundTrip[*kmsg.JoinGroupResponse](connB, joinRequest(5, "busy", "", 10*time.Second))
	b := first.MemberID
	joinB := connB.send(joinRequest(5, "busy", b, 10*time.Second))
	require.Eventually(t, func() bool {
		return roundTrip[*kmsg.HeartbeatResponse](connA, heartbeatRequest(3, "busy", a, gen)).ErrorCode == kerr.RebalanceInProgress.Code
	}, 5*time.Second, 10*time.Millisecond, "A's heartbeat should tell it to rejoin")
	require.Equal(t, kerr.RebalanceInProgress.Code,
		roundTrip[*kmsg.SyncGroupResponse](connA, syncRequest(3, "busy", a, gen, nil)).ErrorCode)
	commit := roundTrip[*kmsg.OffsetCommitResponse](connA, commitRequest(7, "busy", a, gen, "t", 0, 5))
	require.Zero(t, commit.Topics[0].Partitions[0].ErrorCode, "a member may commit while the group prepares a rebalance")

	// A rejoins: the join completes for both, A still leading.
	joinedA := roundTrip[*kmsg.JoinGroupResponse](connA, joinRequest(5, "busy", a, 10*time.Second))
	var joinedB kmsg.JoinGroupResponse
	joinedB.Version = 5
	connB.read(&joinedB, joinB)
	require.Zero(t, joinedA.ErrorCode)
	require.Zero(t, joinedB.ErrorCode)
	require.Equal(t, gen+1, joinedA.Generation)
	require.Equal(t, gen+1, joinedB.Generation)
	require.Equal(t, a, joinedB.LeaderID)
	require.Empty(t, joinedB.Members, "only the leader gets the members")
	var ids []string
	for _, m := range joinedA.Members {
		ids = append(ids, m.MemberID)
	}
	require.ElementsMatch(t, []string{a, b}, ids)

	// B's SyncGroup waits for the leader's; meanwhile commits are refused.
	syncB := connB.send(syncRequest(3, "busy", b, gen+1, nil))
	require.Eventually(t, func() bool { return snapshot(c, "busy").syncWaiting == 1 }, 5*time.Second, 10*time.Millisecond)
	commit = roundTrip[*kmsg.OffsetCommitResponse](connA, commitRequest(7, "busy", a, gen+1, "t", 0, 6))
	require.Equal(t, kerr.RebalanceInProgress.Code, commit.Topics[0].Partitions[0].ErrorCode)
	syncedA := roundTrip[*kmsg.SyncGroupResponse](connA, syncRequest(3, "busy", a, gen+1, map[string]string{a: "for-a", b: "for-b"}))
	var syncedB kmsg.SyncGroupResponse
	syncedB.Version = 3
	connB.read(&syncedB, syncB)
	require.Zero(t, syncedA.ErrorCode)
	require.Zero(t, syncedB.ErrorCode)
	require.Equal(t, "for-a", string(syncedA.MemberAssignment))
	require.Equal(t, "for-b", string(syncedB.MemberAssignment))
	require.Equal(t, groupStable, snapshot(c, "busy").state)
	require.Zero(t, roundTrip[*kmsg.HeartbeatResponse](connB, heartbeatRequest(3, "busy", b, gen+1)).ErrorCode)

	// Both leave in one LeaveGroup v3, with a stranger.
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group = 3, "busy"
	leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: a}, {MemberID: "stranger"}, {MemberID: b}}
	left := roundTrip[*kmsg.LeaveGroupResponse](connA, leave)
	require.Zero(t, left.ErrorCode)
	require.Len(t, left.Members, 3)
	require.Equal(t, []int16{0, kerr.UnknownMemberID.Code, 0},
		[]int16{left.Members[0].ErrorCode, left.Members[1].ErrorCode, left.Members[2].ErrorCode})
	s := snapshot(c, "busy")
	require.Equal(t, groupEmpty, s.state)
	require.Zero(t, s.members)
	fetched := roundTrip[*kmsg.OffsetFetchResponse](connA, offsetFetchRequest(5, "busy", "t", 0))
	require.Equal(t, int64(5), fetched.Topics[0].Partitions[0].Offset, "offsets outlive the members")
}

func TestGroupSessionExpiry(t *testing.T) {
	c := startTestCluster(t, 1, groupSets...)
	conn := dialRaw(t, addr(t, c, 0, "CLIENT"))
	const session = time.Second
	member, gen := stableMember(t, conn, "sessions", session)
	// Heartbeats keep the member for several session timeouts.
	for range 25 {
		require.Zero(t, roundTrip[*kmsg.HeartbeatResponse](conn, heartbeatRequest(4, "sessions", member, gen)).ErrorCode)
		time.Sleep(session / 10)
	}
	// Without them, the session expires and the group empties.
	require.Eventually(t, func() bool { return snapshot(c, "sessions").members == 0 }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, kerr.UnknownMemberID.Code, roundTrip[*kmsg.HeartbeatResponse](conn, heartbeatRequest(4, "sessions", member, gen)).ErrorCode)
	s := snapshot(c, "sessions")
	require.Equal(t, groupEmpty, s.state)
	require.Equal(t, gen+1, s.generation, "the empty group is a new generation")
}

// TestGroupSessionExpiryAfterWaitingSync checks that a follower's session
// counts again once its waiting SyncGroup is answered: it expires while
// the leader, with a long session, heartbeats.
func TestGroupSessionExpiryAfterWaitingSync(t *testing.T) {
	c := startTestCluster(t, 1, groupSets...)
	bootstrap := addr(t, c, 0, "CLIENT")
	connA, connB := dialRaw(t, bootstrap), dialRaw(t, bootstrap)
	first := roundTrip[*kmsg.JoinGroupResponse](connA, joinRequest(3, "follower", "", 10*time.Second))
	require.Zero(t, first.ErrorCode)
	a := first.MemberID
	joinB := connB.send(joinRequest(3, "follower", "", 300*time.Millisecond))
	require.Eventually(t, func() bool { return snapshot(c, "follower").joinWaiting == 1 }, 5*time.Second, 10*time.Millisecond)
	joinedA := roundTrip[*kmsg.JoinGroupResponse](connA, joinRequest(3, "follower", a, 10*time.Second))
	var joinedB kmsg.JoinGroupResponse
	joinedB.Version = 3
	connB.read(&joinedB, joinB)
	gen := joinedA.Generation
	syncB := connB.send(syncRequest(3, "follower", joinedB.MemberID, gen, nil))
	require.Eventually(t, func() bool { return snapshot(c, "follower").syncWaiting == 1 }, 5*time.Second, 10*time.Millisecond)
	time.Sleep(time.Second) // the leader is slow, but a waiting member's session does not expire
	require.Equal(t, 2, snapshot(c, "follower").members)
	require.Zero(t, roundTrip[*kmsg.SyncGroupResponse](connA, syncRequest(3, "follower", a, gen, nil)).ErrorCode)
	var syncedB kmsg.SyncGroupResponse
	syncedB.Version = 3
	connB.read(&syncedB, syncB)
	require.Zero(t, syncedB.ErrorCode)

	// B never heartbeats: it leaves after its 300 ms, and A must rejoin.
	require.Eventually(t, func() bool {
		return roundTrip[*kmsg.HeartbeatResponse](connA, heartbeatRequest(3, "follower", a, gen)).ErrorCode == kerr.RebalanceInProgress.Code
	}, 3*time.Second, 50*time.Millisecond)
	require.Equal(t, 1, snapshot(c, "follower").members)
}

func TestGroupRebalanceTimeoutRemovesMembersThatDoNotRejoin(t *testing.T) {
	c := startTestCluster(t, 1, groupSets...)
	bootstrap := addr(t, c, 0, "CLIENT")
	connA, connB := dialRaw(t, bootstrap), dialRaw(t, bootstrap)
	req := joinRequest(3, "slow", "", 10*time.Second)
	req.RebalanceTimeoutMillis = 300
	joinedA := roundTrip[*kmsg.JoinGroupResponse](connA, req)
	require.Zero(t, joinedA.ErrorCode)
	a := joinedA.MemberID
	require.Zero(t, roundTrip[*kmsg.SyncGroupResponse](connA, syncRequest(3, "slow", a, 1, nil)).ErrorCode)

	// B joins; A heartbeats, so that its session lives, but never rejoins.
	start := time.Now()
	joinB := connB.send(req)
	frames := make(chan []byte, 1)
	go func() {
		frame, _ := connB.readFrame()
		frames <- frame
	}()
	var frame []byte
	for alive := true; frame == nil; {
		select {
		case frame = <-frames:
		case <-time.After(50 * time.Millisecond):
			if !alive {
				continue
			}
			// REBALANCE_IN_PROGRESS until the rebalance ends without A.
			code := roundTrip[*kmsg.HeartbeatResponse](connA, heartbeatRequest(3, "slow", a, 1)).ErrorCode
			require.Contains(t, []int16{kerr.RebalanceInProgress.Code, kerr.UnknownMemberID.Code}, code)
			alive = code == kerr.RebalanceInProgress.Code
		}
	}
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "the join should wait for A until the rebalance timeout")
	var joinedB kmsg.JoinGroupResponse
	joinedB.Version = 3
	decode(t, frame, &joinedB, joinB)
	require.Zero(t, joinedB.ErrorCode)
	require.Equal(t, int32(2), joinedB.Generation)
	require.Equal(t, joinedB.MemberID, joinedB.LeaderID, "B leads the new generation alone")
	require.Len(t, joinedB.Members, 1)
	require.Equal(t, kerr.UnknownMemberID.Code, roundTrip[*kmsg.HeartbeatResponse](connA, heartbeatRequest(3, "slow", a, 1)).ErrorCode)
}

func TestGroupInitialRebalanceDelay(t *testing.T) {
	c := startTestCluster(t, 1, "group.initial.rebalance.delay.ms=300")
	bootstrap := addr(t, c, 0, "CLIENT")
	connA, connB := dialRaw(t, bootstrap), dialRaw(t, bootstrap)
	start := time.Now()
	joinA := connA.send(joinRequest(3, "delayed", "", 10*time.Second))
	time.Sleep(100 * time.Millisecond)
	joinB := connB.send(joinRequest(3, "delayed", "", 10*time.Second))
	var joinedA, joinedB kmsg.JoinGroupResponse
	joinedA.Version, joinedB.Version = 3, 3
	connA.read(&joinedA, joinA)
	connB.read(&joinedB, joinB)
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	require.Zero(t, joinedA.ErrorCode)
	require.Zero(t, joinedB.ErrorCode)
	require.Equal(t, int32(1), joinedA.Generation, "both members join the first generation")
	require.Equal(t, int32(1), joinedB.Generation)
	require.Equal(t, joinedA.MemberID, joinedA.LeaderID, "the first to join leads")
	require.Len(t, joinedA.Members, 2)
}

// TestGroupProtocolVersions runs a member's whole life (join, sync,
// heartbeat, commit, fetch, leave) at the versions of each client.
func TestGroupProtocolVersions(t *testing.T) {
	c := startTestCluster(t, 1, groupSets...)
	conn := dialRaw(t, addr(t, c, 0, "CLIENT"))
	createTopic(t, conn, "t", 1)
	topicID := c.state.topic("t").id
	for _, tc := range []struct {
		name                                        string
		join, sync, heartbeat, leave, commit, fetch int16
	}{
		{"v0", 0, 0, 0, 0, 0, 0},
		{"kafka-go's SyncGroup v0, LeaveGroup v0, OffsetFetch v1", 2, 0, 0, 0, 2, 1},
		{"OffsetFetch v5", 4, 2, 2, 2, 6, 5},
		{"kafkajs's JoinGroup v5, SyncGroup v3", 5, 3, 3, 3, 7, 7},
		{"first flexible versions", 6, 4, 4, 4, 8, 6},
		{"newest, as kgo", 9, 5, 4, 5, 10, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			group := "life-" + tc.name
			j := joinNew(t, conn, tc.join, group, time.Second)
			me, gen := j.MemberID, j.Generation
			sync := syncRequest(tc.sync, group, me, gen, map[string]string{me: "mine"})
			if tc.sync >= 5 {
				sync.ProtocolType, sync.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
			}
			synced := roundTrip[*kmsg.SyncGroupResponse](conn, sync)
			require.Zero(t, synced.ErrorCode)
			require.Equal(t, "mine", string(synced.MemberAssignment))
			require.Zero(t, roundTrip[*kmsg.HeartbeatResponse](conn, heartbeatRequest(tc.heartbeat, group, me, gen)).ErrorCode)

			commit := commitRequest(tc.commit, group, me, gen, "t", 0, 42)
			if tc.commit == 0 { // v0 has no member: only an empty group takes it
				commit = nil
			} else if tc.commit >= 10 {
				commit.Topics[0].Topic, commit.Topics[0].TopicID = "", topicID
			}
			if commit != nil {
				resp := roundTrip[*kmsg.OffsetCommitResponse](conn, commit)
				require.Zero(t, resp.Topics[0].Partitions[0].ErrorCode)
			}
			fetch := offsetFetchRequest(tc.fetch, group, "t", 0, 9)
			if tc.fetch >= 10 {
				fetch.Groups[0].Topics[0].Topic, fetch.Groups[0].Topics[0].TopicID = "", topicID
			}
			fetched := roundTrip[*kmsg.OffsetFetchResponse](conn, fetch)
			var offsets []int64
			if tc.fetch >= 8 {
				require.Zero(t, fetched.Groups[0].ErrorCode)
				require.Equal(t, tc.fetch >= 10, fetched.Groups[0].Topics[0].TopicID == topicID)
				for _, p := range fetched.Groups[0].Topics[0].Partitions {
					offsets = append(offsets, p.Offset)
				}
			} else {
				require.Zero(t, fetched.ErrorCode)
				for _, p := range fetched.Topics[0].Partitions {
					offsets = append(offsets, p.Offset)
				}
			}
			want := []int64{42, -1} // partition 9 has no commit (nor exists)
			if commit == nil {
				want[0] = -1
			}
			require.Equal(t, want, offsets)

			leave := kmsg.NewPtrLeaveGroupRequest()
			leave.Version, leave.Group, leave.MemberID = tc.leave, group, me
			leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: me}}
			require.Zero(t, roundTrip[*kmsg.LeaveGroupResponse](conn, leave).ErrorCode)
			require.Zero(t, snapshot(c, group).members)
		})
	}
}

func TestGroupOffsetsWithoutMembers(t *testing.T) {
	c := startTestCluster(t, 1, groupSets...)
	conn := dialRaw(t, addr(t, c, 0, "CLIENT"))
	createTopic(t, conn, "a", 2)
	createTopic(t, conn, "b", 1)

	// A simple consumer commits with generation -1 to a group no one joined.
	for _, commit := range []*kmsg.OffsetCommitRequest{
		commitRequest(0, "simple", "", -1, "a", 0, 10),
		commitRequest(2, "simple", "", -1, "a", 1, 11),
		commitRequest(8, "simple", "", -1, "b", 0, 12),
	} {
		resp := roundTrip[*kmsg.OffsetCommitResponse](conn, commit)
		require.Zero(t, resp.Topics[0].Partitions[0].ErrorCode, "OffsetCommit v%d", commit.Version)
	}
	unknownID := kmsg.NewPtrOffsetCommitRequest()
	unknownID.Version, unknownID.Group, unknownID.Generation = 10, "simple", -1
	unknownID.Topics = []kmsg.OffsetCommitRequestTopic{{TopicID: [16]byte{1}, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	require.Equal(t, kerr.UnknownTopicID.Code, roundTrip[*kmsg.OffsetCommitResponse](conn, unknownID).Topics[0].Partitions[0].ErrorCode)

	// Null topics: every committed offset, by name, or by id in v10.
	all := kmsg.NewPtrOffsetFetchRequest()
	all.Version, all.Group = 7, "simple"
	resp := roundTrip[*kmsg.OffsetFetchResponse](conn, all)
	got := map[string]int64{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			got[fmt.Sprintf("%s/%d", rt.Topic, rp.Partition)] = rp.Offset
		}
	}
	require.Equal(t, map[string]int64{"a/0": 10, "a/1": 11, "b/0": 12}, got)

	all = kmsg.NewPtrOffsetFetchRequest()
	all.Version = 10
	all.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "simple", MemberEpoch: -1}, {Group: "nobody-committed", MemberEpoch: -1}}
	resp = roundTrip[*kmsg.OffsetFetchResponse](conn, all)
	require.Len(t, resp.Groups, 2)
	require.Len(t, resp.Groups[0].Topics, 2)
	require.Equal(t, c.state.topic("a").id, resp.Groups[0].Topics[0].TopicID)
	require.Equal(t, c.state.topic("b").id, resp.Groups[0].Topics[1].TopicID)
	require.Empty(t, resp.Groups[1].Topics)
	require.Zero(t, resp.Groups[1].ErrorCode)

	// An unknown partition, or group, has offset -1.
	for _, group := range []string{"simple", "nobody-committed"} {
		fetched := roundTrip[*kmsg.OffsetFetchResponse](conn, offsetFetchRequest(1, group, "b", 3))
		p := fetched.Topics[0].Partitions[0]
		require.Zero(t, p.ErrorCode)
		require.Equal(t, int64(-1), p.Offset)
	}

	// DescribeGroups and ListGroups see the simple group as Empty.
	describe := kmsg.NewPtrDescribeGroupsRequest()
	describe.Version, describe.Groups = 6, []string{"simple", "nobody-committed"}
	described := roundTrip[*kmsg.DescribeGroupsResponse](conn, describe)
	require.Equal(t, "Empty", described.Groups[0].State)
	require.Zero(t, described.Groups[0].ErrorCode)
	require.Equal(t, kerr.GroupIDNotFound.Code, described.Groups[1].ErrorCode)
	list := kmsg.NewPtrListGroupsRequest()
	list.Version, list.StatesFilter = 5, []string{"empty"}
	listed := roundTrip[*kmsg.ListGroupsResponse](conn, list)
	require.Len(t, listed.Groups, 1)
	require.Equal(t, "simple", listed.Groups[0].Group)
	require.Equal(t, "classic", listed.Groups[0].GroupType)
	list.StatesFilter = []string{"Stable"}
	require.Empty(t, roundTrip[*kmsg.ListGroupsResponse](conn, list).Groups)
}

// TestGroupWaitingRequestsEnd checks that a JoinGroup or SyncGroup that
// waits ends when its client disconnects or the cluster stops, and that
// nothing is left running once the cluster is closed.
func TestGroupWaitingRequestsEnd(t *testing.T) {
	joinWaits := "group.initial.rebalance.delay.ms=60000"
	for _, tc := range []struct {
		name string
		set  string // the initial delay
		// wait leaves a request waiting on conn and returns its
		// correlation id.
		wait func(t *testing.T, c *cluster, conn *rawConn) int32
		// end ends the wait: the client disconnects, or the cluster stops.
		end func(t *testing.T, c *cluster, conn *rawConn, corr int32)
	}{
		{"client disconnects during JoinGroup", joinWaits, waitInJoin, func(t *testing.T, c *cluster, conn *rawConn, _ int32) {
			require.NoError(t, conn.conn.Close())
			require.Eventually(t, func() bool { return snapshot(c, "waiting").members == 0 }, 5*time.Second, 10*time.Millisecond,
				"the member that went away should leave the group")
		}},
		{"client disconnects during SyncGroup", groupSets[0], waitInSync, func(t *testing.T, c *cluster, conn *rawConn, _ int32) {
			require.NoError(t, conn.conn.Close())
			require.Eventually(t, func() bool { return snapshot(c, "waiting").syncWaiting == 0 }, 5*time.Second, 10*time.Millisecond)
		}},
		{"cluster shuts down during JoinGroup", joinWaits, waitInJoin, func(t *testing.T, c *cluster, conn *rawConn, corr int32) {
			shut := make(chan error, 1)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			go func() { shut <- c.Shutdown(ctx) }()
			resp := kmsg.NewPtrJoinGroupResponse()
			resp.Version = 3
			conn.read(resp, corr)
			require.Equal(t, kerr.NotCoordinator.Code, resp.ErrorCode, "the client should look for the coordinator again")
			require.NoError(t, <-shut)
		}},
		{"cluster shuts down during SyncGroup", groupSets[0], waitInSync, func(t *testing.T, c *cluster, conn *rawConn, corr int32) {
			shut := make(chan error, 1)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			go func() { shut <- c.Shutdown(ctx) }()
			resp := kmsg.NewPtrSyncGroupResponse()
			resp.Version = 3
			conn.read(resp, corr)
			require.Equal(t, kerr.NotCoordinator.Code, resp.ErrorCode)
			require.NoError(t, <-shut)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := goleak.IgnoreCurrent()
			c := startTestCluster(t, 1, tc.set)
			conn := dialRaw(t, addr(t, c, 0, "CLIENT"))
			corr := tc.wait(t, c, conn)
			tc.end(t, c, conn, corr)
			c.Close()
			goleak.VerifyNone(t, before)
		})
	}
}

// waitInJoin leaves a JoinGroup waiting for the initial delay of a new
// group.
func waitInJoin(t *testing.T, c *cluster, conn *rawConn) int32 {
	t.Helper()
	corr := conn.send(joinRequest(3, "waiting", "", 10*time.Second))
	require.Eventually(t, func() bool { return snapshot(c, "waiting").joinWaiting == 1 }, 5*time.Second, 10*time.Millisecond)
	return corr
}

// waitInSync makes conn's member a follower whose SyncGroup waits for the
// leader's, which never comes.
func waitInSync(t *testing.T, c *cluster, conn *rawConn) int32 {
	t.Helper()
	leader := dialRaw(t, addr(t, c, 0, "CLIENT"))
	req := joinRequest(3, "waiting", "", 10*time.Second)
	first := roundTrip[*kmsg.JoinGroupResponse](leader, req)
	require.Zero(t, first.ErrorCode)
	joinFollower := conn.send(req)
	require.Eventually(t, func() bool { return snapshot(c, "waiting").joinWaiting == 1 }, 5*time.Second, 10*time.Millisecond)
	rejoined := roundTrip[*kmsg.JoinGroupResponse](leader, joinRequest(3, "waiting", first.MemberID, 10*time.Second))
	require.Zero(t, rejoined.ErrorCode)
	var follower kmsg.JoinGroupResponse
	follower.Version = 3
	conn.read(&follower, joinFollower)
	require.Zero(t, follower.ErrorCode)
	require.Equal(t, first.MemberID, follower.LeaderID)
	corr := conn.send(syncRequest(3, "waiting", follower.MemberID, follower.Generation, nil))
	require.Eventually(t, func() bool { return snapshot(c, "waiting").syncWaiting == 1 }, 5*time.Second, 10*time.Millisecond)
	return corr
}

func TestGroupStaticMember(t *testing.T) {
	c := startTestCluster(t, 1, groupSets...)
	bootstrap := addr(t, c, 0, "CLIENT")
	conn, restarted := dialRaw(t, bootstrap), dialRaw(t, bootstrap)
	static := func(memberID string) *kmsg.JoinGroupRequest {
		req := joinRequest(5, "static", memberID, 10*time.Second)
		req.InstanceID = kmsg.StringPtr("instance-1")
		return req
	}
	// A static member joins without MEMBER_ID_REQUIRED.
	first := roundTrip[*kmsg.JoinGroupResponse](conn, static(""))
	require.Zero(t, first.ErrorCode)
	require.Regexp(t, `^instance-1-`, first.MemberID)
	require.Equal(t, "instance-1", *first.Members[0].InstanceID)
	sync := syncRequest(3, "static", first.MemberID, first.Generation, map[string]string{first.MemberID: "p0"})
	sync.InstanceID = kmsg.StringPtr("instance-1")
	require.Zero(t, roundTrip[*kmsg.SyncGroupResponse](conn, sync).ErrorCode)

	// It restarts: the new member id replaces the old, which is fenced.
	second := roundTrip[*kmsg.JoinGroupResponse](restarted, static(""))
	require.Zero(t, second.ErrorCode)
	require.NotEqual(t, first.MemberID, second.MemberID)
	require.Equal(t, second.MemberID, second.LeaderID)
	require.Equal(t, 1, snapshot(c, "static").members)
	hb := heartbeatRequest(3, "static", first.MemberID, second.Generation)
	hb.InstanceID = kmsg.StringPtr("instance-1")
	require.Equal(t, kerr.FencedInstanceID.Code, roundTrip[*kmsg.HeartbeatResponse](conn, hb).ErrorCode)
	require.Equal(t, kerr.UnknownMemberID.Code,
		roundTrip[*kmsg.HeartbeatResponse](conn, heartbeatRequest(3, "static", first.MemberID, second.Generation)).ErrorCode)

	// An admin removes it by instance id alone.
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group = 4, "static"
	leave.Members = []kmsg.LeaveGroupRequestMember{{InstanceID: kmsg.StringPtr("instance-1")}}
	left := roundTrip[*kmsg.LeaveGroupResponse](conn, leave)
	require.Zero(t, left.Members[0].ErrorCode)
	require.Equal(t, groupEmpty, snapshot(c, "static").state)

	// A kgo static member that restarts gets the partitions back at once,
	// long before the old member's session (45 s) would expire.
	createTopic(t, conn, "t", 3)
	old := startMember(t, bootstrap, "static-kgo", "t", kgo.InstanceID("kgo-1"))
	require.Eventually(t, func() bool { return len(old.partitions()) == 3 }, 10*time.Second, 20*time.Millisecond)
	old.close() // a static member does not leave
	require.Equal(t, 1, snapshot(c, "static-kgo").members)
	renewed := startMember(t, bootstrap, "static-kgo", "t", kgo.InstanceID("kgo-1"))
	require.Eventually(t, func() bool { return len(renewed.partitions()) == 3 }, 10*time.Second, 20*time.Millisecond)
	s := snapshot(c, "static-kgo")
	require.Equal(t, 1, s.members)
	require.Equal(t, groupStable, s.state)
}

func TestGroupSettings(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sets    []string
		want    groupSettings
		wantErr string
	}{
		{"Kafka's defaults", nil, groupSettings{3 * time.Second, 6 * time.Second, 30 * time.Minute, 50, 3}, ""},
		{"set", []string{"group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=100", "group.max.session.timeout.ms=1000",
			"offsets.topic.num.partitions=7", "offsets.topic.replication.factor=1"},
			groupSettings{0, 100 * time.Millisecond, time.Second, 7, 1}, ""},
		{"negative delay", []string{"group.initial.rebalance.delay.ms=-1"}, groupSettings{}, "group.initial.rebalance.delay.ms"},
		{"not a number", []string{"group.min.session.timeout.ms=soon"}, groupSettings{}, "group.min.session.timeout.ms"},
		{"max below min", []string{"group.max.session.timeout.ms=10"}, groupSettings{}, "group.max.session.timeout.ms"},
		{"no offsets partitions", []string{"offsets.topic.num.partitions=0"}, groupSettings{}, "offsets.topic.num.partitions"},
		{"too many offsets partitions", []string{"offsets.topic.num.partitions=10001"}, groupSettings{}, "offsets.topic.num.partitions"},
		{"offsets partitions not a number", []string{"offsets.topic.num.partitions=many"}, groupSettings{}, "offsets.topic.num.partitions"},
		{"no offsets replicas", []string{"offsets.topic.replication.factor=0"}, groupSettings{}, "offsets.topic.replication.factor"},
		{"offsets replicas beyond a short", []string{"offsets.topic.replication.factor=32768"}, groupSettings{}, "offsets.topic.replication.factor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			props, err := config.Properties{}.With(tc.sets...)
			require.NoError(t, err)
			cfg, err := readBrokerConfig(props)
			require.NoError(t, err)
			got, err := readGroupSettings(cfg)
			if tc.wantErr != "" {
				var ce *config.Error
				require.ErrorAs(t, err, &ce)
				require.Equal(t, tc.wantErr, ce.Key)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestGroupCoordinatorMatchesKafkaPartitioning(t *testing.T) {
	c := startTestCluster(t, 3)
	for _, tc := range []struct {
		group  string
		broker int32 // Utils.abs(group.hashCode()) % 50 % 3, hash codes from Java
	}{
		{"my-group", 0},           // -1906497762: partition 12
		{"payments", 1},           // 1382682413: partition 13
		{"orders-service", 2},     // 23943117: partition 17
		{"analytics", 1},          // -1693017210: partition 10 (masking the sign bit would give 2)
		{"polygenelubricants", 0}, // Integer.MIN_VALUE, which Kafka's abs makes 0
	} {
		require.Equal(t, c.settings.nodeID+tc.broker, c.coordinatorOf(tc.group), tc.group)
	}
}
