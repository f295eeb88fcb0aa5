package main

import (
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeUpstream is a one-broker upstream cluster written by hand, for
// what examples/broker never does: it answers ApiVersions and Metadata
// (naming itself node 0) properly, and ListGroups (which the proxy
// forwards raw) and DescribeCluster (which it decodes) as the test's
// answer function says, whatever bytes that is. It records the API keys
// it was sent.
type fakeUpstream struct {
	t    *testing.T
	ln   net.Listener
	apis []kmsg.ApiVersionsResponseApiKey

	mu     sync.Mutex
	answer answerFunc
	fetch  kmsg.Response // answers every Fetch, when set (serveFetch)
	// produce frames the answer to every Produce, when set (serveProduce).
	produce func(corr int32, version int16) []byte
	keys    map[int16]int
	conns   []net.Conn
	wg      sync.WaitGroup
	// stopAt, when set, is a key after whose request the fake reads
	// nothing more of that connection, nor answers it, until it closes
	// (stopReadingAt); receiveBuffer, when set, is its connections'
	// SO_RCVBUF.
	stopAt        int16
	receiveBuffer int
	quit          chan struct{} // closed when the test ends
	// SASL (PLAIN, any password): the session lifetime a login gets, and
	// whether a connection's renewal (its second SaslAuthenticate) goes
	// unanswered (stallRenewals).
	lifetime      time.Duration
	stallRenewals bool
	// headFirst, when set, writes each answer's size and correlation id
	// alone, then the rest a moment later: a proxy reads the head without
	// the body, as it must to move a large body socket to socket.
	headFirst bool
}

// answerFunc returns the bytes that answer a ListGroups or DescribeCluster
// request: nil for no answer (the request hangs), and whether the broker
// then closes the connection.
type answerFunc func(key kmsg.Key, corr int32, version int16) (out []byte, hangUp bool)

// startFakeUpstream serves ApiVersions, Metadata, ListGroups and
// DescribeCluster, and SASL PLAIN with any password to a proxy that logs
// in (sessions without a lifetime unless stallRenewalsAfter says).
func startFakeUpstream(t *testing.T) *fakeUpstream {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &fakeUpstream{t: t, ln: ln, keys: map[int16]int{}, stopAt: -1, quit: make(chan struct{})}
	for _, k := range []struct{ key, min, max int16 }{{18, 0, 3}, {3, 0, 12}, {16, 0, 4}, {17, 0, 1}, {36, 0, 2}, {60, 0, 1}} {
		a := kmsg.NewApiVersionsResponseApiKey()
		a.ApiKey, a.MinVersion, a.MaxVersion = k.key, k.min, k.max
		f.apis = append(f.apis, a)
	}
	f.answer = f.good
	f.wg.Go(f.accept)
	t.Cleanup(func() {
		ln.Close()
		close(f.quit)
		f.mu.Lock()
		for _, c := range f.conns {
			c.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
	return f
}

func (f *fakeUpstream) addr() string { return f.ln.Addr().String() }

// kill makes the broker go away at once, as one killed (SIGKILL) does: it
// accepts no more connections, and its connections close with the
// requests it holds unanswered.
func (f *fakeUpstream) kill() {
	f.ln.Close()
	f.mu.Lock()
	for _, c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
}

// setAnswer sets how ListGroups is answered.
func (f *fakeUpstream) setAnswer(answer answerFunc) {
	f.mu.Lock()
	f.answer = answer
	f.mu.Unlock()
}

// serveFetch makes the fake serve Fetch v4 to v12, answering each Fetch
// with resp at the request's version. Call it before the proxy starts,
// which reads the fake's API versions then.
func (f *fakeUpstream) serveFetch(resp kmsg.Response) {
	f.mu.Lock()
	f.advertise(kmsg.Fetch, 4, 12)
	f.fetch = resp
	f.mu.Unlock()
}

// advertise adds key, from version min to max, to the APIs the fake's
// ApiVersions answer lists. f.mu is held.
func (f *fakeUpstream) advertise(key kmsg.Key, min, max int16) {
	a := kmsg.NewApiVersionsResponseApiKey()
	a.ApiKey, a.MinVersion, a.MaxVersion = int16(key), min, max
	f.apis = append(f.apis, a)
}

// serveProduce makes the fake serve Produce v10 to v13, answering each
// with answer's frame, size included. Call it before the proxy starts.
func (f *fakeUpstream) serveProduce(answer func(corr int32, version int16) []byte) {
	f.mu.Lock()
	f.advertise(kmsg.Produce, 10, 13)
	f.produce = answer
	f.mu.Unlock()
}

// stopReadingAt makes the fake stop reading a connection once it has read
// a request of key (it neither answers it nor reads further), with
// receive buffers of rcvbuf bytes on the connections it accepts from then
// on, so that what the peer writes next soon fills the sockets' buffers.
func (f *fakeUpstream) stopReadingAt(key kmsg.Key, rcvbuf int) {
	f.mu.Lock()
	f.stopAt, f.receiveBuffer = int16(key), rcvbuf
	f.mu.Unlock()
}

// stallRenewalsAfter makes the logins on connections from now on last
// lifetime, and leaves their renewals unanswered.
func (f *fakeUpstream) stallRenewalsAfter(lifetime time.Duration) {
	f.mu.Lock()
	f.lifetime, f.stallRenewals = lifetime, true
	f.mu.Unlock()
}

// sent returns how many requests of key the fake got.
func (f *fakeUpstream) sent(key kmsg.Key) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.keys[int16(key)]
}

func (f *fakeUpstream) accept() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.conns = append(f.conns, c)
		if f.receiveBuffer > 0 {
			_ = c.(*net.TCPConn).SetReadBuffer(f.receiveBuffer)
		}
		f.mu.Unlock()
		f.wg.Go(func() { f.serve(c) })
	}
}

// serve answers one connection's requests in order. Fetch answers are
// encoded once per connection and version, and written from there, so
// that the fake allocates little per request.
func (f *fakeUpstream) serve(c net.Conn) {
	defer c.Close()
	fetches := map[int16][]byte{}
	logins := 0
	var lifetime time.Duration // of this connection's logins
	for {
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(c, frame); err != nil {
			return
		}
		key, version := int16(binary.BigEndian.Uint16(frame)), int16(binary.BigEndian.Uint16(frame[2:]))
		corr := int32(binary.BigEndian.Uint32(frame[4:]))
		f.mu.Lock()
		f.keys[key]++
		answer, stop := f.answer, key == f.stopAt
		f.mu.Unlock()
		if stop {
			<-f.quit
			return
		}
		var out []byte
		hangUp := false
		switch kmsg.Key(key) {
		case kmsg.ApiVersions:
			resp := kmsg.NewPtrApiVersionsResponse()
			resp.Version, resp.ApiKeys = version, f.apis
			out = responseBytes(resp, corr)
		case kmsg.SASLHandshake:
			resp := kmsg.NewPtrSASLHandshakeResponse()
			resp.Version, resp.SupportedMechanisms = version, []string{"PLAIN"}
			out = responseBytes(resp, corr)
		case kmsg.SASLAuthenticate:
			f.mu.Lock()
			if logins == 0 {
				lifetime = f.lifetime
			}
			stall := f.stallRenewals && logins > 0
			f.mu.Unlock()
			if logins++; stall {
				continue // a renewal: no answer
			}
			resp := kmsg.NewPtrSASLAuthenticateResponse()
			resp.Version, resp.SessionLifetimeMillis = version, lifetime.Milliseconds()
			out = responseBytes(resp, corr)
		case kmsg.Metadata:
			resp := kmsg.NewPtrMetadataResponse()
			resp.Version = version
			host, port, _ := net.SplitHostPort(f.addr())
			p, _ := strconv.Atoi(port)
			resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 0, Host: host, Port: int32(p)}}
			resp.ControllerID = 0
			out = responseBytes(resp, corr)
		case kmsg.Fetch:
			f.mu.Lock()
			resp := f.fetch
			f.mu.Unlock()
			if resp == nil {
				return
			}
			if fetches[version] == nil {
				resp.SetVersion(version)
				fetches[version] = responseBytes(resp, 0)
			}
			out = fetches[version]
			binary.BigEndian.PutUint32(out[4:], uint32(corr))
		case kmsg.Produce:
			f.mu.Lock()
			answer := f.produce
			f.mu.Unlock()
			if answer == nil {
				return
			}
			out = answer(corr, version)
		case kmsg.ListGroups, kmsg.DescribeCluster:
			if out, hangUp = answer(kmsg.Key(key), corr, version); out == nil && !hangUp {
				continue // hang: no answer
			}
		default:
			return
		}
		f.mu.Lock()
		headFirst := f.headFirst
		f.mu.Unlock()
		if headFirst && len(out) > 8 {
			if _, err := c.Write(out[:8]); err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond) // the proxy reads the head alone
			out = out[8:]
		}
		if _, err := c.Write(out); err != nil || hangUp {
			return
		}
	}
}

// good answers ListGroups (no group) and DescribeCluster (the fake as its
// one broker) properly.
func (f *fakeUpstream) good(key kmsg.Key, corr int32, version int16) ([]byte, bool) {
	resp := kmsg.ResponseForKey(int16(key))
	resp.SetVersion(version)
	if dc, ok := resp.(*kmsg.DescribeClusterResponse); ok {
		host, port, _ := net.SplitHostPort(f.addr())
		p, _ := strconv.Atoi(port)
		dc.Brokers = []kmsg.DescribeClusterResponseBroker{{NodeID: 0, Host: host, Port: int32(p)}}
	}
	return responseBytes(resp, corr), false
}

// responseBytes frames resp as a broker does.
func responseBytes(resp kmsg.Response, corr int32) []byte {
	body := responseFrame(resp, corr)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}
