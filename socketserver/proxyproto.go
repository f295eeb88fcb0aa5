package socketserver

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/pires/go-proxyproto"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/internal/configerr"
	"github.com/kafkanet/kafkanet/internal/connreg"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
)

// The PROXY protocol (HAProxy's, versions 1 and 2): a load balancer that
// relays TCP connections to the server begins each with a header that
// says where the client connected from. A listener that requires it
// (ProxyProtocol, kafkanet.proxy.protocol=required) reads the header on
// the connection's own goroutine, before anything else, and from then on
// the connection is the client's: its id, Info.ClientAddr, the per-address
// connection quotas, filters, hooks and logs use the address the header
// gave, and Info.ProxyAddr holds the balancer's.
//
// A connection's way on such a listener, beside the plain one of conn.go:
//
//	acceptor (server.go)   listener and broker limits (admit), with no
//	                       address: the per-address part waits for the header
//	processor.register     counts the connection (Server.conns) and starts its
//	                       goroutine, serveProxied; the socket is pending
//	                       (processor.pending) until it is registered
//	serveProxied           refuses a peer outside the trusted networks before
//	                       reading anything; reads the header within the
//	                       handshake deadline; applies the per-address
//	                       quotas to the client's address; registers the
//	                       connection (processor.add) under its real
//	                       address, then runs it as conn.run does any other,
//	                       the TLS handshake and SASL exchange within the
//	                       same deadline
//
// A pending socket is no conn of the processor's yet: nothing but its
// goroutine touches it or moves its deadline, and Shutdown's drain and
// Close close it (it has no request to finish); processor.add makes it a
// conn, under processor.mu, only while the server is not draining. A
// refused connection (ErrProxyUntrusted, ErrProxyHeader) is closed,
// logged once at Info, reported to the HookProxyRefused hooks and kept in
// the registry's history of closed connections (connregistry.CloseProxyRefused)
// under the socket's addresses; it never reaches HookConnCreated.

// ProxyProtocolMode says whether a listener's connections begin with a
// PROXY protocol header.
type ProxyProtocolMode uint8

// The modes, the values of kafkanet.proxy.protocol.
const (
	// ProxyProtocolNone: connections begin with TLS or Kafka's framing, as
	// in Kafka (the zero value).
	ProxyProtocolNone ProxyProtocolMode = iota
	// ProxyProtocolRequired: every connection begins with a PROXY header,
	// version 1 or 2, from an address of the trusted networks.
	ProxyProtocolRequired
)

// String returns the mode as kafkanet.proxy.protocol writes it: none or
// required.
func (m ProxyProtocolMode) String() string {
	switch m {
	case ProxyProtocolNone:
		return "none"
	case ProxyProtocolRequired:
		return "required"
	}
	return fmt.Sprintf("ProxyProtocolMode(%d)", uint8(m))
}

// ProxyProtocol is a listener's use of the PROXY protocol, for a listener
// behind a TCP load balancer (HAProxy's send-proxy or send-proxy-v2, AWS's
// Network Load Balancer, Azure's and Google Cloud's private endpoints).
// With ProxyProtocolRequired, a connection from an address outside
// TrustedNetworks is closed before anything is read from it
// ([ErrProxyUntrusted]), and one from inside that does not begin with a
// valid header within the listener's handshake timeout
// (security.Settings.HandshakeTimeout, which then bounds the header, the
// TLS handshake and the SASL exchange together) is closed too
// ([ErrProxyHeader]); either is reported to [HookProxyRefused]. The
// header is read on the connection's own goroutine, never on the
// acceptor, so a slow sender holds up no one else. After the header the
// connection is the client's: its id, its registry entry, the per-address
// connection quotas, filters, hooks and logs have the client's address,
// and [connregistry.Info] holds the balancer's (ProxyAddr) and the v2
// header's fields (ProxyTLVs). A LOCAL
// header (v2; UNKNOWN in v1), which a balancer sends for its own
// connections such as health checks, and a header for a client on a UNIX
// socket of the balancer's, keep the socket's address; a header for a
// datagram connection is refused. A v2 header may carry at most 4 KiB of
// addresses and fields (the parser's bound), and at most 32 fields
// besides NOOP padding.
type ProxyProtocol struct {
	// Mode is ProxyProtocolNone or ProxyProtocolRequired.
	Mode ProxyProtocolMode
	// TrustedNetworks are the networks of the load balancers, which alone
	// may send the header (a header from anywhere else could claim any
	// address). Required, and not empty, with ProxyProtocolRequired; a
	// connection whose address is not an IP address (a host's
	// Config.Listen) is never trusted. An IPv4-mapped IPv6 prefix stands
	// for its IPv4 prefix, as client addresses are compared unmapped.
	TrustedNetworks []netip.Prefix
}

// Errors of the PROXY protocol: the connection was closed before it was
// served (see [ProxyProtocol], [HookProxyRefused]).
var (
	// ErrProxyUntrusted: the connection came from outside the listener's
	// trusted networks.
	ErrProxyUntrusted = errors.New("socketserver: PROXY protocol: connection from outside kafkanet.proxy.protocol.trusted.networks")
	// ErrProxyHeader: the connection did not begin with a valid PROXY
	// header within the handshake timeout. It wraps the parser's error
	// (github.com/pires/go-proxyproto) when there is one.
	ErrProxyHeader = errors.New("socketserver: PROXY protocol: no valid header")
)

// required reports whether the listener's connections begin with a header.
func (p ProxyProtocol) required() bool { return p.Mode == ProxyProtocolRequired }

// trusts reports whether the header is accepted from a.
func (p ProxyProtocol) trusts(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	a = a.Unmap().WithZone("") // a prefix never contains an address with a zone
	for _, n := range p.TrustedNetworks {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// The keys of the PROXY protocol, which the configuration package reads
// (config.KeyProxyProtocol, config.KeyProxyProtocolTrustedNetworks); New
// names them in its errors about a ProxyProtocol built in code, as the
// configuration names them about one read from properties.
const (
	keyProxyProtocol                = "kafkanet.proxy.protocol"
	keyProxyProtocolTrustedNetworks = "kafkanet.proxy.protocol.trusted.networks"
)

// validate checks p for listener l, as New does for a Config built in
// code; its errors name the listener's prefixed keys.
func (p ProxyProtocol) validate(l protocolmap.ListenerName) error {
	switch p.Mode {
	case ProxyProtocolNone:
		return nil
	case ProxyProtocolRequired:
	default:
		return &configerr.Error{Key: l.ConfigPrefix() + keyProxyProtocol, Value: p.Mode.String(), Err: listener.ErrInvalidValue,
			Rule: "must be none or required"}
	}
	if len(p.TrustedNetworks) == 0 {
		return noTrustedNetworks(l.ConfigPrefix()+keyProxyProtocolTrustedNetworks, "")
	}
	for _, n := range p.TrustedNetworks {
		if !n.IsValid() {
			return &configerr.Error{Key: l.ConfigPrefix() + keyProxyProtocolTrustedNetworks, Value: n.String(), Err: listener.ErrInvalidValue,
				Rule: "ListenerConfig.ProxyProtocol.TrustedNetworks holds an invalid prefix"}
		}
	}
	return nil
}

// noTrustedNetworks is the error of a listener that requires the header
// and trusts no network to send it.
func noTrustedNetworks(key, value string) error {
	return &configerr.Error{Key: key, Value: value, Err: listener.ErrInvalidValue,
		Rule: keyProxyProtocol + "=required needs the networks of the load balancers that send the PROXY header " +
			"(a header from anywhere else could claim any client address); 0.0.0.0/0,::/0 trusts every address"}
}

// HookProxyRefused is called when a listener that requires the PROXY
// protocol refuses a connection before serving it: err wraps
// [ErrProxyUntrusted] (the peer is outside the trusted networks) or
// [ErrProxyHeader] (no valid header within the handshake timeout). addr is
// the socket's peer: the balancer, or whoever connected. The connection
// was never registered, so HookConnCreated and HookConnClosed do not see
// it; the registry keeps it among the closed connections
// (connregistry.CloseProxyRefused).
type HookProxyRefused interface {
	OnProxyRefused(l protocolmap.ListenerName, addr netip.AddrPort, err error)
}

// Bounds of a PROXY header.
const (
	proxyV1MaxLen = 107 // the longest v1 line, CRLF included (the specification's worst case)
	proxyV2Prefix = 16  // signature, version and command, family, length
	maxProxyTLVs  = 32  // fields kept, NOOP padding aside: what stays in the registry entry is bounded
)

var (
	proxyV1Signature = []byte("PROXY ")
	proxyV2Signature = []byte("\r\n\r\n\x00\r\nQUIT\n")
	// errProxyNothing: the peer closed (or reset) the connection before
	// sending a byte (a balancer's or scanner's bare connect): not a
	// refusal, a probe (Stats.ProbesClosed).
	errProxyNothing = errors.New("socketserver: PROXY protocol: closed before any byte")
)

// proxyHeader is what a PROXY header said of its connection.
type proxyHeader struct {
	version byte
	local   bool           // LOCAL (v2), UNKNOWN (v1), or a UNIX-socket client: the socket's addresses stand
	own     bool           // LOCAL (v2), UNKNOWN (v1): the balancer's own connection, such as a health check
	source  netip.AddrPort // the client's address, unless local
	tlvs    []connregistry.ProxyTLV
	size    int // bytes the header took
}

// readProxyHeader reads a PROXY header, v1 or v2, from the start of br,
// and leaves the bytes after it in br, unread: the TLS handshake or Kafka's
// framing reads them next. br must be a connection's read buffer
// (readBufSize bytes). It reads no more than the header and what the
// peer's reads brought with it, and holds no more memory than the peer
// sent: a v2 header that does not fit the buffer is read into a slice
// that grows as its bytes arrive, and one that claims more than the
// parser accepts (proxyproto.MaxV2HeaderSize, 4 KiB, plus the 16-byte
// prefix) is refused before its bytes are read. The header itself is
// parsed by github.com/pires/go-proxyproto, once all of it is in hand. It
// blocks until the header is in or a read fails: the caller sets the
// deadline. Errors wrap ErrProxyHeader, but errProxyNothing (nothing was
// sent) and the read errors of a connection closed meanwhile.
func readProxyHeader(br *bufio.Reader) (proxyHeader, error) {
	first, err := br.Peek(1)
	if err != nil {
		if peerGone(err) {
			return proxyHeader{}, errProxyNothing
		}
		return proxyHeader{}, incompleteProxyHeader(err)
	}
	var n int
	switch first[0] {
	case proxyV1Signature[0]:
		n, err = proxyV1Size(br)
	case proxyV2Signature[0]:
		n, err = proxyV2Size(br)
	default:
		err = fmt.Errorf("%w: the connection does not begin with one (first byte %#02x)", ErrProxyHeader, first[0])
	}
	if err != nil {
		return proxyHeader{}, err
	}
	var h *proxyproto.Header
	var raw []byte // the header's bytes, for its checksum
	if n <= br.Size() {
		// The whole header is in the buffer (proxyV1Size and proxyV2Size
		// peeked it): the parser reads exactly it from there, and raw
		// stays valid until br reads the socket again.
		raw, _ = br.Peek(n)
		before := br.Buffered()
		h, err = proxyproto.Read(br)
		if err == nil && before-br.Buffered() != n {
			err = fmt.Errorf("the parser read %d bytes of a %d-byte header", before-br.Buffered(), n)
		}
	} else {
		if raw, err = readProxyV2(br, n); err != nil {
			return proxyHeader{}, err
		}
		r := bytes.NewReader(raw)
		src := bufio.NewReaderSize(r, 64) // the parser streams a v2 header: a small buffer suffices
		h, err = proxyproto.Read(src)
		if err == nil && src.Buffered()+r.Len() != 0 {
			err = fmt.Errorf("the parser left %d bytes of a %d-byte header", src.Buffered()+r.Len(), n)
		}
	}
	if err != nil {
		return proxyHeader{}, fmt.Errorf("%w: %w", ErrProxyHeader, err)
	}
	return proxyHeaderOf(h, raw)
}

// proxyV1Size waits until br holds a v1 header's line whole, and returns
// its length, CRLF included. Bytes that cannot begin "PROXY " fail at
// once; no line end within the longest line fails.
func proxyV1Size(br *bufio.Reader) (int, error) {
	for {
		b, _ := br.Peek(br.Buffered())
		if k := min(len(b), len(proxyV1Signature)); !bytes.Equal(b[:k], proxyV1Signature[:k]) {
			return 0, fmt.Errorf("%w: the connection does not begin with one", ErrProxyHeader)
		}
		if i := bytes.IndexByte(b[:min(len(b), proxyV1MaxLen)], '\n'); i >= 0 {
			return i + 1, nil
		}
		if len(b) >= proxyV1MaxLen {
			return 0, fmt.Errorf("%w: %w", ErrProxyHeader, proxyproto.ErrVersion1HeaderTooLong)
		}
		if _, err := br.Peek(len(b) + 1); err != nil {
			return 0, incompleteProxyHeader(err)
		}
	}
}

// proxyV2Size reads a v2 header's 16-byte prefix and returns the header's
// length. A header that fits the buffer is peeked whole.
func proxyV2Size(br *bufio.Reader) (int, error) {
	b, err := br.Peek(proxyV2Prefix)
	if k := min(len(b), len(proxyV2Signature)); !bytes.Equal(b[:k], proxyV2Signature[:k]) {
		return 0, fmt.Errorf("%w: the connection does not begin with one", ErrProxyHeader)
	}
	if err != nil {
		return 0, incompleteProxyHeader(err)
	}
	length := binary.BigEndian.Uint16(b[14:])
	if length > proxyproto.MaxV2HeaderSize {
		return 0, fmt.Errorf("%w: %w: %d bytes after the prefix, over the %d accepted", ErrProxyHeader, proxyproto.ErrInvalidLength,
			length, proxyproto.MaxV2HeaderSize)
	}
	n := proxyV2Prefix + int(length)
	if n <= br.Size() {
		if _, err := br.Peek(n); err != nil {
			return 0, incompleteProxyHeader(err)
		}
	}
	return n, nil
}

// readProxyV2 reads a v2 header of n bytes that does not fit the read
// buffer into a slice of its own, grown as its bytes arrive (at most
// twice what arrived), never reading past it.
func readProxyV2(br *bufio.Reader, n int) ([]byte, error) {
	b := make([]byte, 0, min(n, 2*br.Size()))
	for len(b) < n {
		if len(b) == cap(b) {
			b = slices.Grow(b, min(n, 2*cap(b))-len(b))
		}
		k, err := br.Read(b[len(b):min(cap(b), n)])
		b = b[:len(b)+k]
		if err != nil && len(b) < n {
			return nil, incompleteProxyHeader(err)
		}
	}
	return b, nil
}

// incompleteProxyHeader is the error of a header cut short by err: a
// deadline, the peer's EOF, or the connection closed. A connection the
// server closed (Shutdown, Close) keeps its error unwrapped.
func incompleteProxyHeader(err error) error {
	if errors.Is(err, net.ErrClosed) {
		return err
	}
	if isDeadline(err) {
		return fmt.Errorf("%w: none complete within the handshake timeout: %w", ErrProxyHeader, err)
	}
	return fmt.Errorf("%w: incomplete: %w", ErrProxyHeader, err)
}

// proxyHeaderOf takes what matters from a parsed header, whose bytes are
// raw, and checks a v2 header's checksum if it has one.
func proxyHeaderOf(h *proxyproto.Header, raw []byte) (proxyHeader, error) {
	out := proxyHeader{version: h.Version, size: len(raw)}
	switch {
	case h.Command.IsLocal():
		out.local, out.own = true, true
	case h.TransportProtocol == proxyproto.TCPv4, h.TransportProtocol == proxyproto.TCPv6:
		src, _, ok := h.TCPAddrs()
		if !ok {
			return proxyHeader{}, fmt.Errorf("%w: no TCP source address", ErrProxyHeader)
		}
		ap := src.AddrPort()
		out.source = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	case h.TransportProtocol == proxyproto.UnixStream:
		out.local = true // the client has no address of its own: the balancer's stands
	default:
		return proxyHeader{}, fmt.Errorf("%w: a header for a datagram connection (%#02x)", ErrProxyHeader, byte(h.TransportProtocol))
	}
	if h.Version != 2 {
		return out, nil
	}
	tlvs, err := h.TLVs()
	if err != nil {
		return proxyHeader{}, fmt.Errorf("%w: %w", ErrProxyHeader, err)
	}
	if err := checkProxyCRC32C(raw, tlvs); err != nil {
		return proxyHeader{}, err
	}
	for _, t := range tlvs {
		if t.Type == proxyproto.PP2_TYPE_NOOP {
			continue
		}
		if len(out.tlvs) == maxProxyTLVs {
			return proxyHeader{}, fmt.Errorf("%w: more than %d fields besides NOOP", ErrProxyHeader, maxProxyTLVs)
		}
		out.tlvs = append(out.tlvs, connregistry.ProxyTLV{Type: uint8(t.Type), Value: t.Value})
	}
	return out, nil
}

// checkProxyCRC32C checks the PP2_TYPE_CRC32C field of a v2 header whose
// bytes are raw and whose fields are tlvs, if it has one: the CRC32C
// (Castagnoli) of the whole header, the field's 4 bytes taken as zeros,
// must be the field's value (big-endian), or the connection is refused, as
// the PROXY protocol's specification says of a receiver that checks it.
// The fields are the header's last bytes, in order.
func checkProxyCRC32C(raw []byte, tlvs []proxyproto.TLV) error {
	off := len(raw)
	for _, t := range tlvs {
		off -= 3 + len(t.Value)
	}
	for _, t := range tlvs {
		at := off + 3 // the value's offset in raw
		off = at + len(t.Value)
		if t.Type != proxyproto.PP2_TYPE_CRC32C {
			continue
		}
		if len(t.Value) != 4 {
			return fmt.Errorf("%w: a CRC32C field of %d bytes, not 4", ErrProxyHeader, len(t.Value))
		}
		table := crc32.MakeTable(crc32.Castagnoli)
		sum := crc32.Update(0, table, raw[:at])
		sum = crc32.Update(sum, table, []byte{0, 0, 0, 0})
		sum = crc32.Update(sum, table, raw[at+4:])
		if want := binary.BigEndian.Uint32(t.Value); sum != want {
			return fmt.Errorf("%w: its CRC32C field says %#08x, its checksum is %#08x", ErrProxyHeader, want, sum)
		}
	}
	return nil
}

// serveProxied serves a connection of a listener that requires the PROXY
// protocol, on a goroutine of its own, from the time the processor
// registered its socket as pending (at accepted): it checks the peer,
// reads the header, applies the per-address quotas to the client's
// address and registers the connection under it, then runs it (conn.run).
// The header's deadline is the handshake's: the header, the TLS handshake
// and the SASL exchange share the listener's handshake timeout.
func (p *processor) serveProxied(nc net.Conn, accepted time.Time) {
	if c, deadline, ok := p.acceptProxied(nc, accepted); ok {
		c.run(deadline)
	}
}

// acceptProxied is serveProxied's work before the connection runs: it
// reports the connection, registered, and its handshake's deadline, or
// ok false when it has been refused or dropped. It is never inlined: its
// frame (a connection's description, the log's arguments: over 1 KiB)
// would stay under every wait of the connection's goroutine (see run).
//
//go:noinline
func (p *processor) acceptProxied(nc net.Conn, accepted time.Time) (c *conn, deadline time.Time, ok bool) {
	srv, ls := p.srv, p.ls
	sock := addrPort(nc.RemoteAddr())
	c = &conn{nc: nc, p: p}
	c.rw = nc
	c.pre.r = nc
	c.br = srv.readBuf(c.socket())
	if !ls.proxy.trusts(sock.Addr()) {
		p.refuseProxied(c, sock, accepted, fmt.Errorf("%w: %s", ErrProxyUntrusted, sock.Addr()))
		return nil, time.Time{}, false
	}
	deadline = accepted.Add(ls.sec.timeout)
	_ = nc.SetReadDeadline(deadline) // a pending socket's deadline is its goroutine's alone
	h, err := readProxyHeader(c.br)
	_ = nc.SetReadDeadline(time.Time{})
	switch {
	case err == nil:
	case errors.Is(err, ErrProxyHeader) && !c.draining():
		p.refuseProxied(c, sock, accepted, err)
		return nil, time.Time{}, false
	default: // nothing sent, or closed by Shutdown or Close
		srv.log.Debug("connection closed before its PROXY header", "listener", ls.cfg.Name, "address", sock, "err", err)
		if errors.Is(err, errProxyNothing) {
			ls.probes.Add(1)
		}
		p.dropPending(c, true)
		return nil, time.Time{}, false
	}
	c.pre.got = false // the header's bytes: what comes after it tells a probe (peerLeft)
	c.pre.proxyLocal = h.own
	client := sock
	if !h.local {
		client = h.source
	}
	if hold, err := srv.quotas.acquireIP(ls.cfg.Name, client.Addr()); err != nil {
		srv.connRejected(ls, client, sock, err, hold) // the quota gave the listener's slot back
		if hold > 0 {
			t := time.NewTimer(hold)
			select {
			case <-t.C:
			case <-srv.quit:
			case <-srv.drainStarted:
			case <-ls.drainStarted:
			}
			t.Stop()
		}
		p.dropPending(c, false)
		return nil, time.Time{}, false
	}
	if ls.sec.tls != nil && c.br.Buffered() > 0 {
		// The start of the TLS handshake came with the header: crypto/tls,
		// which reads the socket, reads it first (see restReader).
		rest := make([]byte, c.br.Buffered())
		_, _ = io.ReadFull(c.br, rest)
		c.pre.r = &restReader{rest: rest, r: nc}
	} else {
		c.pre.r = takeSocket(nc)
	}
	info := p.newInfo(nc.LocalAddr(), net.TCPAddrFromAddrPort(client), client)
	info.ConnectedAt, info.ProxyAddr, info.ProxyTLVs = accepted, sock, h.tlvs
	if !p.start(c, info) {
		srv.quotas.release(ls.cfg.Name, client.Addr()) // its address's slot, and the listener's
		p.dropPending(c, false)
		return nil, time.Time{}, false
	}
	return c, deadline, true
}

// refuseProxied closes a pending connection that the PROXY protocol
// refuses (err), from the socket's peer sock, accepted at accepted: it
// logs it once, tells the HookProxyRefused hooks, and records it in the
// registry's history as closed (connregistry.CloseProxyRefused) under the
// socket's addresses.
func (p *processor) refuseProxied(c *conn, sock netip.AddrPort, accepted time.Time, err error) {
	srv, l := p.srv, p.ls.cfg.Name
	srv.log.Info("refused connection: PROXY protocol", "listener", l, "address", sock, "err", err)
	for _, h := range srv.hooks.proxyRefused {
		h.OnProxyRefused(l, sock, err)
	}
	if errors.Is(err, ErrProxyUntrusted) { // the peer is the client
		srv.auditRefused(p.ls, sock, netip.AddrPort{}, err, 0)
	} else { // a trusted balancer's bad header: the client is unknown
		srv.auditRefused(p.ls, netip.AddrPort{}, sock, err, 0)
	}
	info := p.newInfo(c.nc.LocalAddr(), c.nc.RemoteAddr(), sock)
	info.ConnectedAt = accepted
	connreg.Add(srv.registry, connregistry.Conn{Info: info, State: connregistry.StateClosing}, nil).Remove(time.Now(), connregistry.CloseProxyRefused)
	p.dropPending(c, true)
}

// dropPending closes a pending connection that is not served, gives back
// its read buffer and, with releaseSlot, the listener's quota slot the
// acceptor took for it, and ends its count in Server.conns (and its
// listener's).
func (p *processor) dropPending(c *conn, releaseSlot bool) {
	p.mu.Lock()
	delete(p.pending, c.nc)
	p.mu.Unlock()
	c.nc.Close()
	if releaseSlot {
		p.srv.quotas.release(p.ls.cfg.Name, netip.Addr{})
	}
	p.srv.putReadBuf(c.br)
	c.br = nil
	p.connDone()
}

// restReader is what crypto/tls reads of a PROXY listener's TLS connection:
// the bytes that came after the header in the read buffer's last read (the
// start of the client's hello), then the socket. crypto/tls takes them all
// in its first read, which asks for more than a read buffer holds; the
// handshake checks that it has (see conn.handshake), so that a parked
// connection, which reads the socket itself, never reads ahead of them.
type restReader struct {
	rest []byte
	r    io.Reader
}

func (r *restReader) Read(b []byte) (int, error) {
	if len(r.rest) == 0 {
		return r.r.Read(b)
	}
	n := copy(b, r.rest)
	r.rest = r.rest[n:]
	return n, nil
}
