package connregistry

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DefaultListAPIKey is the API key KIP-1329 gives ListClientConnections. Kafka
// 4.4 (and kmsg from v1.14) has since given key 93 to
// StreamsGroupTopologyDescriptionUpdate, so a server must route this key to
// [ListClientConnectionsRequest] itself rather than through kmsg, and a
// host that also serves Kafka Streams groups should pick another key: every
// type here takes its key from its APIKey field.
const DefaultListAPIKey int16 = 93

// Tag numbers of the fields beyond KIP-1329's schema. They travel as tagged
// fields, so a client built from the KIP's schema alone still decodes the
// response.
const (
	// Request.
	tagIncludeClosed = 0 // bool: also list recently closed connections
	// tagServerNameFilter selects by TLS server name (compact string), in
	// ListClientConnections' and CloseClientConnections' requests: see
	// [Filter.ServerName].
	tagServerNameFilter = 1
	// tagSortBy (compact string, a [SortKey]) orders the listing;
	// tagLimit (int32) keeps its first connections only. Both apply to the
	// open connections: the closed ones (IncludeClosed) follow, all of
	// them, oldest first.
	tagSortBy = 2
	tagLimit  = 3

	// Response.
	tagErrorMessage = 0 // compact nullable string

	// Each connection.
	tagClientID        = 0  // compact string: client id of the last request
	tagSASLMechanism   = 1  // compact string
	tagTLSVersion      = 2  // compact string, e.g. TLS 1.3
	tagCipherSuite     = 3  // compact string
	tagAuthenticatedAt = 4  // int64 epoch ms, -1 when never
	tagSessionExpiry   = 5  // int64 epoch ms, -1 when sessions do not expire
	tagLastActivity    = 6  // int64 epoch ms
	tagBytesIn         = 7  // int64
	tagBytesOut        = 8  // int64
	tagRequests        = 9  // int64
	tagState           = 10 // compact string: authenticating, ready, closing
	tagPlane           = 11 // compact string: data or control
	tagClosedAt        = 12 // int64 epoch ms, closed connections only
	tagCloseReason     = 13 // compact string, closed connections only
	tagThrottledUntil  = 14 // int64 epoch ms: when the throttle that mutes the connection ends; sent only while one does
	tagThrottleTime    = 15 // int64 ms: time muted by throttles in all; sent only when not zero
	tagProxyAddr       = 16 // compact string host:port: the load balancer that sent the PROXY header; sent only with one
	tagServerName      = 17 // compact string: the TLS server name the client asked for (SNI); sent only when there is one
	tagRequestRate     = 18 // float64: requests per second over about the last minute; sent only when not zero
	tagBytesInRate     = 19 // float64: request bytes per second, likewise
	tagBytesOutRate    = 20 // float64: response bytes per second, likewise
)

// ListClientConnectionsRequest is KIP-1329's request, version 0 (flexible).
// Nil filters do not filter.
type ListClientConnectionsRequest struct {
	APIKey              int16 // 0 means DefaultListAPIKey
	Version             int16
	PrincipalFilter     *string
	ClientAddressFilter *string
	ListenerFilter      *string
	IncludeClosed       bool // tag 0
	// ServerNameFilter (tag 1) selects by TLS server name; see
	// [Filter.ServerName].
	ServerNameFilter *string
	// SortBy (tag 2) orders the open connections by a [SortKey] (the
	// busiest first) instead of by connection time; "" is connection
	// time. Limit (tag 3), when positive, lists only the first Limit open
	// connections in that order ([Registry.Top]); 0 lists them all. A
	// server that predates them ignores both: a client that needs the
	// order applies it to what it gets, as connadmin does.
	SortBy SortKey
	Limit  int32
}

// ListClientConnectionsResponse is KIP-1329's response, version 0.
type ListClientConnectionsResponse struct {
	APIKey         int16
	Version        int16
	ThrottleTimeMs int32
	ErrorCode      int16
	ErrorMessage   *string // tag 0
	Connections    []ConnectionRecord
}

// ConnectionRecord is one connection of a response: KIP-1329's fields,
// then the tagged extras.
type ConnectionRecord struct {
	ConnectionID     string
	Principal        string // KIP-1329: the authenticated principal, Type:name (User:alice)
	PrincipalType    string // e.g. User
	ClientAddress    string
	ClientPort       int32
	ListenerName     string
	SecurityProtocol string
	SoftwareName     string
	SoftwareVersion  string
	ConnectedSince   int64 // epoch ms

	ClientID        string
	SASLMechanism   string
	TLSVersion      string
	CipherSuite     string
	AuthenticatedAt int64
	SessionExpiry   int64
	LastActivity    int64
	BytesIn         int64
	BytesOut        int64
	Requests        int64
	State           string
	Plane           string
	ClosedAt        int64
	CloseReason     string
	// ThrottledUntil is when the throttle muting the connection ends, in
	// epoch ms; 0 when none does. ThrottleTimeMs is the time the
	// connection has been muted by throttles in all.
	ThrottledUntil int64
	ThrottleTimeMs int64
	// ProxyAddress is the load balancer's address, host:port ([::1]:9092
	// for IPv6), on a listener that requires the PROXY protocol
	// (ClientAddress and ClientPort are then the client's, from the
	// header); empty otherwise.
	ProxyAddress string
	// ServerName is the TLS server name the client asked for (SNI); empty
	// without one.
	ServerName string
	// RequestRate, BytesInRate and BytesOutRate are the connection's
	// recent rates, per second over about the last minute
	// ([Conn.RequestRate]); 0 from a server that predates them.
	RequestRate  float64
	BytesInRate  float64
	BytesOutRate float64
}

func keyOr(k int16) int16 {
	if k == 0 {
		return DefaultListAPIKey
	}
	return k
}

// Key returns the API key (DefaultListAPIKey unless APIKey is set).
func (r *ListClientConnectionsRequest) Key() int16 { return keyOr(r.APIKey) }

// SetKey sets the API key, so that a server that decodes the request under
// a key of its choosing answers under the same key.
func (r *ListClientConnectionsRequest) SetKey(key int16) { r.APIKey = key }

// MaxVersion returns 0, the only version.
func (*ListClientConnectionsRequest) MaxVersion() int16 { return 0 }

// SetVersion sets the version.
func (r *ListClientConnectionsRequest) SetVersion(v int16) { r.Version = v }

// GetVersion returns the version.
func (r *ListClientConnectionsRequest) GetVersion() int16 { return r.Version }

// IsFlexible returns true: version 0 is flexible.
func (*ListClientConnectionsRequest) IsFlexible() bool { return true }

// ResponseKind returns an empty response with the same key and version.
func (r *ListClientConnectionsRequest) ResponseKind() kmsg.Response {
	return &ListClientConnectionsResponse{APIKey: r.APIKey, Version: r.Version}
}

// AppendTo appends the request's encoding.
func (r *ListClientConnectionsRequest) AppendTo(dst []byte) []byte {
	dst = appendCompactNullableString(dst, r.PrincipalFilter)
	dst = appendCompactNullableString(dst, r.ClientAddressFilter)
	dst = appendCompactNullableString(dst, r.ListenerFilter)
	n := 0
	for _, set := range [...]bool{r.IncludeClosed, r.ServerNameFilter != nil, r.SortBy != "", r.Limit != 0} {
		if set {
			n++
		}
	}
	dst = binary.AppendUvarint(dst, uint64(n))
	if r.IncludeClosed {
		dst = binary.AppendUvarint(dst, tagIncludeClosed)
		dst = binary.AppendUvarint(dst, 1)
		dst = append(dst, 1)
	}
	dst = appendServerNameFilter(dst, r.ServerNameFilter)
	dst = appendStringTag(dst, tagSortBy, string(r.SortBy))
	if r.Limit != 0 {
		dst = binary.AppendUvarint(dst, tagLimit)
		dst = append(dst, 4)
		dst = binary.BigEndian.AppendUint32(dst, uint32(r.Limit))
	}
	return dst
}

// Filter returns the request's filters.
func (r *ListClientConnectionsRequest) Filter() Filter {
	return Filter{Principal: r.PrincipalFilter, ClientAddress: r.ClientAddressFilter, Listener: r.ListenerFilter, ServerName: r.ServerNameFilter}
}

// appendServerNameFilter appends the tagServerNameFilter field, nothing
// for nil.
func appendServerNameFilter(dst []byte, f *string) []byte {
	if f == nil {
		return dst
	}
	return appendTag(dst, tagServerNameFilter, appendCompactString(nil, *f))
}

// ReadFrom decodes the request from src.
func (r *ListClientConnectionsRequest) ReadFrom(src []byte) error {
	d := decoder{b: src}
	r.PrincipalFilter = d.compactNullableString()
	r.ClientAddressFilter = d.compactNullableString()
	r.ListenerFilter = d.compactNullableString()
	r.IncludeClosed, r.ServerNameFilter, r.SortBy, r.Limit = false, nil, "", 0
	d.tags(func(tag uint64, v decoder) error {
		switch tag {
		case tagIncludeClosed:
			r.IncludeClosed = v.bool()
		case tagServerNameFilter:
			r.ServerNameFilter = v.compactNullableString()
		case tagSortBy:
			r.SortBy = SortKey(v.compactString())
		case tagLimit:
			r.Limit = v.int32()
		}
		return v.err
	})
	return d.done()
}

// Key returns the API key.
func (r *ListClientConnectionsResponse) Key() int16 { return keyOr(r.APIKey) }

// MaxVersion returns 0.
func (*ListClientConnectionsResponse) MaxVersion() int16 { return 0 }

// SetVersion sets the version.
func (r *ListClientConnectionsResponse) SetVersion(v int16) { r.Version = v }

// GetVersion returns the version.
func (r *ListClientConnectionsResponse) GetVersion() int16 { return r.Version }

// IsFlexible returns true.
func (*ListClientConnectionsResponse) IsFlexible() bool { return true }

// RequestKind returns an empty request with the same key and version.
func (r *ListClientConnectionsResponse) RequestKind() kmsg.Request {
	return &ListClientConnectionsRequest{APIKey: r.APIKey, Version: r.Version}
}

// Throttle returns the throttle time and that it applies after the
// response (as for every API since KIP-219).
func (r *ListClientConnectionsResponse) Throttle() (int32, bool) { return r.ThrottleTimeMs, true }

// SetThrottle sets the throttle time, as kmsg's responses do, so that a
// server that throttles the request can fill it in.
func (r *ListClientConnectionsResponse) SetThrottle(ms int32) { r.ThrottleTimeMs = ms }

// AppendTo appends the response's encoding, growing dst once for the whole
// listing.
func (r *ListClientConnectionsResponse) AppendTo(dst []byte) []byte {
	size := 16
	if r.ErrorMessage != nil {
		size += len(*r.ErrorMessage) + 8
	}
	for i := range r.Connections {
		size += r.Connections[i].maxSize()
	}
	dst = slices.Grow(dst, size)
	dst = binary.BigEndian.AppendUint32(dst, uint32(r.ThrottleTimeMs))
	dst = binary.BigEndian.AppendUint16(dst, uint16(r.ErrorCode))
	dst = binary.AppendUvarint(dst, uint64(len(r.Connections))+1)
	for i := range r.Connections {
		dst = r.Connections[i].appendTo(dst)
	}
	if r.ErrorMessage == nil {
		return append(dst, 0)
	}
	dst = append(dst, 1)
	return appendTag(dst, tagErrorMessage, appendCompactNullableString(nil, r.ErrorMessage))
}

// maxSize bounds the record's encoded size: its strings, each with up to
// three varints (tag, size, length) of at most 5 bytes for any string
// shorter than 2^28 bytes, and 19 fixed-size fields and tags of at most 11
// bytes each, with the tag count.
func (c *ConnectionRecord) maxSize() int {
	strs := [...]string{c.ConnectionID, c.Principal, c.PrincipalType, c.ClientAddress, c.ListenerName,
		c.SecurityProtocol, c.SoftwareName, c.SoftwareVersion, c.ClientID, c.SASLMechanism, c.TLSVersion,
		c.CipherSuite, c.State, c.Plane, c.CloseReason, c.ProxyAddress, c.ServerName}
	n := 16 * len(strs)
	for _, s := range strs {
		n += len(s)
	}
	return n + 19*11 + 5
}

func (c *ConnectionRecord) appendTo(dst []byte) []byte {
	dst = appendCompactString(dst, c.ConnectionID)
	dst = appendCompactString(dst, c.Principal)
	dst = appendCompactString(dst, c.PrincipalType)
	dst = appendCompactString(dst, c.ClientAddress)
	dst = binary.BigEndian.AppendUint32(dst, uint32(c.ClientPort))
	dst = appendCompactString(dst, c.ListenerName)
	dst = appendCompactString(dst, c.SecurityProtocol)
	dst = appendCompactString(dst, c.SoftwareName)
	dst = appendCompactString(dst, c.SoftwareVersion)
	dst = binary.BigEndian.AppendUint64(dst, uint64(c.ConnectedSince))
	// Tagged extras, in tag order; empty strings and the closed-only fields
	// of open connections are left out. Written in place: a listing of
	// 100,000 connections allocates nothing per tag.
	closed := c.ClosedAt != 0 || c.CloseReason != ""
	strs := [...]struct {
		tag uint64
		s   string
	}{{tagClientID, c.ClientID}, {tagSASLMechanism, c.SASLMechanism}, {tagTLSVersion, c.TLSVersion}, {tagCipherSuite, c.CipherSuite}}
	ints := [...]struct {
		tag uint64
		v   int64
	}{{tagAuthenticatedAt, c.AuthenticatedAt}, {tagSessionExpiry, c.SessionExpiry}, {tagLastActivity, c.LastActivity},
		{tagBytesIn, c.BytesIn}, {tagBytesOut, c.BytesOut}, {tagRequests, c.Requests}}
	n := len(ints)
	for _, f := range strs {
		if f.s != "" {
			n++
		}
	}
	for _, s := range []string{c.State, c.Plane} {
		if s != "" {
			n++
		}
	}
	if closed {
		n++
		if c.CloseReason != "" {
			n++
		}
	}
	for _, v := range [...]int64{c.ThrottledUntil, c.ThrottleTimeMs} {
		if v != 0 {
			n++
		}
	}
	if c.ProxyAddress != "" {
		n++
	}
	if c.ServerName != "" {
		n++
	}
	rates := [...]struct {
		tag uint64
		v   float64
	}{{tagRequestRate, c.RequestRate}, {tagBytesInRate, c.BytesInRate}, {tagBytesOutRate, c.BytesOutRate}}
	for _, f := range rates {
		if f.v != 0 {
			n++
		}
	}
	dst = binary.AppendUvarint(dst, uint64(n))
	for _, f := range strs {
		dst = appendStringTag(dst, f.tag, f.s)
	}
	for _, f := range ints {
		dst = appendInt64Tag(dst, f.tag, f.v)
	}
	dst = appendStringTag(dst, tagState, c.State)
	dst = appendStringTag(dst, tagPlane, c.Plane)
	if closed {
		dst = appendInt64Tag(dst, tagClosedAt, c.ClosedAt)
		dst = appendStringTag(dst, tagCloseReason, c.CloseReason)
	}
	if c.ThrottledUntil != 0 {
		dst = appendInt64Tag(dst, tagThrottledUntil, c.ThrottledUntil)
	}
	if c.ThrottleTimeMs != 0 {
		dst = appendInt64Tag(dst, tagThrottleTime, c.ThrottleTimeMs)
	}
	dst = appendStringTag(dst, tagProxyAddr, c.ProxyAddress)
	dst = appendStringTag(dst, tagServerName, c.ServerName)
	for _, f := range rates {
		if f.v != 0 {
			dst = appendInt64Tag(dst, f.tag, int64(math.Float64bits(f.v)))
		}
	}
	return dst
}

// appendStringTag appends a compact-string tagged field, nothing for "".
func appendStringTag(dst []byte, tag uint64, s string) []byte {
	if s == "" {
		return dst
	}
	dst = binary.AppendUvarint(dst, tag)
	var lenBuf [binary.MaxVarintLen64]byte
	dst = binary.AppendUvarint(dst, uint64(binary.PutUvarint(lenBuf[:], uint64(len(s))+1)+len(s)))
	return appendCompactString(dst, s)
}

func appendInt64Tag(dst []byte, tag uint64, v int64) []byte {
	dst = binary.AppendUvarint(dst, tag)
	dst = append(dst, 8)
	return binary.BigEndian.AppendUint64(dst, uint64(v))
}

// ReadFrom decodes the response from src.
func (r *ListClientConnectionsResponse) ReadFrom(src []byte) error {
	d := decoder{b: src}
	r.ThrottleTimeMs = d.int32()
	r.ErrorCode = d.int16()
	r.Connections = d.connectionRecords()
	r.ErrorMessage = nil
	d.tags(func(tag uint64, v decoder) error {
		if tag == tagErrorMessage {
			r.ErrorMessage = v.compactNullableString()
		}
		return v.err
	})
	return d.done()
}

// connectionRecords reads a compact array of connection records (null reads
// as none).
func (d *decoder) connectionRecords() []ConnectionRecord {
	n := d.compactArrayLen()
	var out []ConnectionRecord
	if n > 0 {
		// Never allocate what the peer merely claims: each record takes at
		// least 20 bytes, so the count is bounded by what arrived.
		out = make([]ConnectionRecord, 0, min(n, len(d.b)/20))
	}
	for range n {
		if d.err != nil {
			break
		}
		var c ConnectionRecord
		c.ConnectionID = d.compactString()
		c.Principal = d.compactString()
		c.PrincipalType = d.compactString()
		c.ClientAddress = d.compactString()
		c.ClientPort = d.int32()
		c.ListenerName = d.compactString()
		c.SecurityProtocol = d.compactString()
		c.SoftwareName = d.compactString()
		c.SoftwareVersion = d.compactString()
		c.ConnectedSince = d.int64()
		d.tags(func(tag uint64, v decoder) error {
			switch tag {
			case tagClientID:
				c.ClientID = v.compactString()
			case tagSASLMechanism:
				c.SASLMechanism = v.compactString()
			case tagTLSVersion:
				c.TLSVersion = v.compactString()
			case tagCipherSuite:
				c.CipherSuite = v.compactString()
			case tagAuthenticatedAt:
				c.AuthenticatedAt = v.int64()
			case tagSessionExpiry:
				c.SessionExpiry = v.int64()
			case tagLastActivity:
				c.LastActivity = v.int64()
			case tagBytesIn:
				c.BytesIn = v.int64()
			case tagBytesOut:
				c.BytesOut = v.int64()
			case tagRequests:
				c.Requests = v.int64()
			case tagState:
				c.State = v.compactString()
			case tagPlane:
				c.Plane = v.compactString()
			case tagClosedAt:
				c.ClosedAt = v.int64()
			case tagCloseReason:
				c.CloseReason = v.compactString()
			case tagThrottledUntil:
				c.ThrottledUntil = v.int64()
			case tagThrottleTime:
				c.ThrottleTimeMs = v.int64()
			case tagProxyAddr:
				c.ProxyAddress = v.compactString()
			case tagServerName:
				c.ServerName = v.compactString()
			case tagRequestRate:
				c.RequestRate = v.float64()
			case tagBytesInRate:
				c.BytesInRate = v.float64()
			case tagBytesOutRate:
				c.BytesOutRate = v.float64()
			}
			return v.err
		})
		out = append(out, c)
	}
	return out
}

func appendTag(dst []byte, tag uint64, value []byte) []byte {
	dst = binary.AppendUvarint(dst, tag)
	dst = binary.AppendUvarint(dst, uint64(len(value)))
	return append(dst, value...)
}

func appendCompactString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s))+1)
	return append(dst, s...)
}

func appendCompactNullableString(dst []byte, s *string) []byte {
	if s == nil {
		return append(dst, 0)
	}
	return appendCompactString(dst, *s)
}

// errMalformed reports bytes that do not decode.
var errMalformed = errors.New("connregistry: malformed message")

// decoder reads the primitives of Kafka's flexible encoding; after the
// first error every read returns zero values.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", errMalformed, what)
	}
	d.b = nil
}

func (d *decoder) take(n int, what string) []byte {
	if d.err != nil || n < 0 || n > len(d.b) {
		d.fail(what)
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int16() int16 {
	b := d.take(2, "int16")
	if b == nil {
		return 0
	}
	return int16(binary.BigEndian.Uint16(b))
}

func (d *decoder) int32() int32 {
	b := d.take(4, "int32")
	if b == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(b))
}

func (d *decoder) int64() int64 {
	b := d.take(8, "int64")
	if b == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b))
}

// float64 reads Kafka's float64, an IEEE 754 double, big-endian, as a
// rate: NaN, which no rate is, reads as 0, so that a peer's bytes cannot
// make an order that is no order.
func (d *decoder) float64() float64 {
	v := math.Float64frombits(uint64(d.int64()))
	if math.IsNaN(v) {
		return 0
	}
	return v
}

func (d *decoder) bool() bool {
	b := d.take(1, "bool")
	return b != nil && b[0] != 0
}

func (d *decoder) compactNullableString() *string {
	s, null := d.compactStringOrNull()
	if null {
		return nil
	}
	return &s
}

// compactString reads a compact string that must not be null (the record
// fields: no pointer allocated per string).
func (d *decoder) compactString() string {
	s, null := d.compactStringOrNull()
	if null && d.err == nil {
		d.fail("null string")
	}
	return s
}

// compactStringOrNull reads a compact nullable string; null is true for a
// null string and after an error.
func (d *decoder) compactStringOrNull() (s string, null bool) {
	n := d.uvarint("string length")
	if d.err != nil || n == 0 {
		return "", true
	}
	if n-1 > uint64(len(d.b)) {
		d.fail("string length")
		return "", true
	}
	return string(d.take(int(n-1), "string")), false
}

func (d *decoder) compactArrayLen() int {
	n := d.uvarint("array length")
	if n == 0 {
		return 0 // null array: treated as empty
	}
	if n-1 > math.MaxInt32 {
		d.fail("array length")
		return 0
	}
	return int(n - 1)
}

// tags reads a tagged-field section, handing each field's bytes to f in a
// decoder of their own (by value, so that it stays on the stack), and
// failing when f returns that decoder's error; unknown tags are skipped.
func (d *decoder) tags(f func(tag uint64, v decoder) error) {
	n := d.uvarint("tag count")
	for range n {
		if d.err != nil {
			return
		}
		tag := d.uvarint("tag")
		size := d.uvarint("tag size")
		if d.err != nil || size > uint64(len(d.b)) {
			d.fail("tag size")
			return
		}
		if err := f(tag, decoder{b: d.take(int(size), "tag")}); err != nil {
			d.fail(fmt.Sprintf("tag %d", tag))
			return
		}
	}
}

func (d *decoder) done() error { return d.err }
