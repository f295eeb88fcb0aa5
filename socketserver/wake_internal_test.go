package socketserver

import (
	"bufio"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// deadlineConn records the read deadlines set on a connection, and whether
// the connection's wakeMu was held when each was set.
type deadlineConn struct {
	net.Conn // nil: only the deadlines are used
	c        *conn

	mu    sync.Mutex
	moves []deadlineMove
}

type deadlineMove struct {
	t      time.Time
	locked bool // wakeMu was held
}

func (d *deadlineConn) SetReadDeadline(t time.Time) error {
	locked := !d.c.wakeMu.TryLock()
	if !locked {
		d.c.wakeMu.Unlock()
	}
	d.mu.Lock()
	d.moves = append(d.moves, deadlineMove{t, locked})
	d.mu.Unlock()
	return nil
}

// take returns the moves recorded since the last take.
func (d *deadlineConn) take() []deadlineMove {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := d.moves
	d.moves = nil
	return m
}

// wakeTestConn is a connection with no socket but deadlineConn, in wait
// state state.
func wakeTestConn(state int32) (*conn, *deadlineConn) {
	srv := &Server{cfg: Config{RequestStallTimeout: time.Second}}
	c := &conn{p: &processor{srv: srv, ls: &listenerState{}, conns: map[*conn]struct{}{}}}
	d := &deadlineConn{c: c}
	c.nc = d
	c.br = bufio.NewReader(strings.NewReader(""))
	c.p.conns[c] = struct{}{}
	c.wait.Store(state)
	return c, d
}

var waitStateNames = map[int32]string{
	waitBusy:      "waitBusy",
	waitAwaiting:  "waitAwaiting",
	waitParking:   "waitParking",
	waitParked:    "waitParked",
	waitReparking: "waitReparking",
}

// TestWaitTransitionsFollowTheTable makes each transition of conn.wait
// from each state the table in conn.go allows it in (the goroutine's) or
// from every state (the wakes of other goroutines), and checks the state it
// leaves, what it reports and the read deadline it sets: the processor's
// wakes succeed only from a state in which the goroutine is blocked in a
// read, and the goroutine's ends of a wait clear the wake's deadline only
// when there was one.
func TestWaitTransitionsFollowTheTable(t *testing.T) {
	type deadline int
	const (
		none  deadline = iota // not moved
		now                   // set to now: a wake
		clear                 // cleared
	)
	type step struct {
		name string
		do   func(c *conn) bool // false: no wake made, or no wake met
	}
	var (
		awaitBegin = step{"awaitBegin", func(c *conn) bool { c.awaitBegin(); return true }}
		awaitEnd   = step{"awaitEnd", (*conn).awaitEnd}
		parkBegin  = step{"parkBegin", func(c *conn) bool { c.parkBegin(); return true }}
		parkEnd    = step{"parkEnd", (*conn).parkEnd}
		toPark     = step{"wakeReader(wakeToPark)", func(c *conn) bool { return c.wakeReader(wakeToPark) }}
		toRepark   = step{"wakeReader(wakeToRepark)", func(c *conn) bool { return c.wakeReader(wakeToRepark) }}
		toDrain    = step{"wakeReader(wakeToDrain)", func(c *conn) bool { return c.wakeReader(wakeToDrain) }}
	)
	for _, tc := range []struct {
		from     int32
		step     step
		ok       bool
		to       int32
		deadline deadline
	}{
		// The goroutine, in the states the table has it make each move in.
		{waitBusy, awaitBegin, true, waitAwaiting, none},
		{waitBusy, parkBegin, true, waitParked, none},
		{waitAwaiting, awaitEnd, false, waitBusy, none}, // its wait ended by itself
		{waitParking, awaitEnd, true, waitBusy, clear},  // the processor woke it
		{waitParked, parkEnd, false, waitBusy, none},
		{waitReparking, parkEnd, true, waitBusy, clear},

		// The processor, from every state: only from a wait.
		{waitBusy, toPark, false, waitBusy, none},
		{waitAwaiting, toPark, true, waitParking, now},
		{waitParking, toPark, false, waitParking, none},
		{waitParked, toPark, false, waitParked, none},
		{waitReparking, toPark, false, waitReparking, none},
		{waitBusy, toRepark, false, waitBusy, none},
		{waitAwaiting, toRepark, false, waitAwaiting, none},
		{waitParking, toRepark, false, waitParking, none},
		{waitParked, toRepark, true, waitReparking, now},
		{waitReparking, toRepark, false, waitReparking, none},

		// Shutdown, from every state: the state does not change.
		{waitBusy, toDrain, true, waitBusy, now},
		{waitAwaiting, toDrain, true, waitAwaiting, now},
		{waitParking, toDrain, true, waitParking, now},
		{waitParked, toDrain, true, waitParked, now},
		{waitReparking, toDrain, true, waitReparking, now},
	} {
		name := waitStateNames[tc.from] + " " + tc.step.name
		c, d := wakeTestConn(tc.from)
		before := time.Now()
		ok := tc.step.do(c)
		if ok != tc.ok {
			t.Errorf("%s: reported %v, want %v", name, ok, tc.ok)
		}
		if got := c.wait.Load(); got != tc.to {
			t.Errorf("%s: state %s after, want %s", name, waitStateNames[got], waitStateNames[tc.to])
		}
		moves := d.take()
		switch {
		case tc.deadline == none && len(moves) != 0:
			t.Errorf("%s: moved the read deadline (%d times), want no move", name, len(moves))
		case tc.deadline != none && len(moves) != 1:
			t.Errorf("%s: moved the read deadline %d times, want once", name, len(moves))
		case tc.deadline == now && (moves[0].t.Before(before) || moves[0].t.After(time.Now())):
			t.Errorf("%s: read deadline %v, want now", name, moves[0].t)
		case tc.deadline == clear && !moves[0].t.IsZero():
			t.Errorf("%s: read deadline %v, want it cleared", name, moves[0].t)
		}
		for _, m := range moves {
			if !m.locked {
				t.Errorf("%s: moved the read deadline without wakeMu", name)
			}
		}
	}
}

// TestReadDeadlineMovesHoldWakeMu checks that every move of the read
// deadline but lingerClose's is made under wakeMu: the wakes of the
// processor and of Shutdown's drain, their clears, and the goroutine's own
// moves (the handshake's and re-authentication's go through the same two
// methods as a frame's stall deadline).
func TestReadDeadlineMovesHoldWakeMu(t *testing.T) {
	c, d := wakeTestConn(waitAwaiting)
	c.askToPark(time.Now())
	c.awaitEnd()
	c.parkBegin()
	c.parkedStack.Store(1 << 20)
	c.askToRepark(2 << 10)
	c.parkEnd()
	c.p.drain()
	c.moveReadDeadline(time.Now().Add(time.Minute))
	c.clearReadDeadline()
	m := &frameMemory{c: c, pool: newMemoryPool(1 << 20)}
	m.reading(1)
	if err := m.done(nil); err != nil {
		t.Fatal(err)
	}
	moves := d.take()
	if len(moves) != 9 {
		t.Errorf("%d read deadline moves, want 9", len(moves))
	}
	for i, m := range moves {
		if !m.locked {
			t.Errorf("move %d (to %v) without wakeMu", i, m.t)
		}
	}
}

// TestClearKeepsShutdownsWake: once Shutdown drains, a clear of the
// goroutine's read deadline (the end of a frame's stall deadline, of the
// handshake's, of a wake) sets it to now instead, so that a read that
// follows before the draining flag is checked (the peer watcher's, for a
// request the host holds) ends at once rather than waiting for the client.
func TestClearKeepsShutdownsWake(t *testing.T) {
	for _, draining := range []bool{false, true} {
		c, d := wakeTestConn(waitParking)
		c.p.srv.draining.Store(draining)
		m := &frameMemory{c: c, pool: newMemoryPool(1 << 20)}
		m.reading(1)
		before := time.Now()
		if err := m.done(nil); err != nil {
			t.Fatal(err)
		}
		c.clearReadDeadline()
		c.awaitEnd() // clearWake
		moves := d.take()
		if len(moves) != 4 {
			t.Fatalf("draining %v: %d read deadline moves, want 4", draining, len(moves))
		}
		for i, m := range moves[1:] {
			switch {
			case !draining && !m.t.IsZero():
				t.Errorf("clear %d: read deadline %v, want it cleared", i, m.t)
			case draining && (m.t.Before(before) || m.t.After(time.Now())):
				t.Errorf("clear %d while draining: read deadline %v, want now", i, m.t)
			}
		}
	}
}
