package socketserver

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/connregistry"
)

const apiVersionsKey = 18

// API is one request type a listener accepts: its key, the versions it
// accepts, and how to make an empty request value to decode into.
type API struct {
	Key        int16
	MinVersion int16
	MaxVersion int16
	// New returns a new request value for this key. For the APIs kmsg knows,
	// [KmsgAPI] fills it; a host sets it for an API kmsg does not know, or to
	// give a key a meaning other than kmsg's (ListClientConnections uses key
	// 93, which kmsg maps to another API). A type whose key is chosen at run
	// time implements KeySetter, and the server sets the key it was decoded
	// under.
	New func() kmsg.Request
	// Inline, when set, answers this API's requests inline, in place of
	// the plane's request channel: the server calls it on the connection's
	// own goroutine as soon as the request is decoded, as net/http calls
	// its handlers, which saves the handoffs to a handler worker and back
	// ([Inline] sets it on a list of APIs). The queue's bound still holds:
	// the handler runs in one of as many slots as the plane's queue has
	// places (queued.max.requests; 20 on the control plane), and a request
	// waits for a slot when all are taken. An inline handler must not block
	// for long, since it holds its connection and its slot; it may answer
	// later, from any goroutine, as any handler may, and a request it hands
	// on so (a long poll) gives its slot back when the handler returns, as
	// a worker moves on to the next request. A panic closes the connection,
	// as in [Server.Serve]. [ListClientConnectionsAPI] and [CloseClientConnectionsAPI] are such APIs.
	// Inline handlers answer from [Server.Start] on, whether Serve runs or
	// not, so one that needs what the host learns after Start (such as
	// every bound address) waits for it.
	Inline Handler
	// Raw, when set, hands this API's requests to the host undecoded
	// ([Raw] sets it on a list of APIs): Request.Body is nil and
	// [Request.Raw] holds the request's header and body as the client sent
	// them, for a host that forwards them (a proxy) or reads them itself.
	// Everything before the host is as for a decoded request: framing and
	// socket.request.max.bytes, authentication, queued.max.request.bytes,
	// the queue or the inline handler, one request in flight, throttling,
	// the hooks and the request log. The host may answer with a decoded
	// response, or with bytes it already has ([Request.RespondRaw],
	// [Request.RespondRawFrom]). New is not called; versions need not be
	// versions kmsg decodes. Which versions have a flexible header (KIP-482:
	// the request header's tagged fields, the response header's) comes from
	// kmsg for a key it knows, or else from New's request type, which must
	// then be set. ApiVersions, SaslHandshake and SaslAuthenticate, which
	// the server answers itself, and [ListClientConnectionsAPI] and
	// [CloseClientConnectionsAPI] cannot be served raw: New fails.
	//
	// Experimental: proven by one host so far (examples/proxy); it may change
	// or go in a minor release, as CONTRIBUTING.md says.
	Raw bool
	// StreamAbove, for an API served raw, streams its frames larger than
	// StreamAbove bytes: the server reads the header (and of a Produce the
	// body up to acks) and hands the request to the host with the rest of
	// the body still in the socket, for the host to read as it moves it
	// ([RawRequest]), so that a large Produce is never held whole. Zero
	// streams none: every frame is read whole first, as for a decoded
	// request. A frame whose header does not fit the connection's read
	// buffer (a client id, or a Produce's transactional id, of some 200
	// bytes or more) is read whole too.
	//
	// Experimental: proven by one host so far (examples/proxy); it may change
	// or go in a minor release, as CONTRIBUTING.md says.
	StreamAbove int
	// Pipeline, for an API served raw, lets a connection go on reading
	// while the host holds this API's requests, up to Pipeline of them at
	// once: the next request is read as soon as the host has the one
	// before it (and has read its streamed body), not once it is
	// answered. Answers are still written in the order of the requests:
	// an answer given before those of earlier requests waits for them,
	// and the goroutine that gives the oldest waiting answer writes it
	// and those ready behind it. A request of an API that does not
	// pipeline, or one the server answers itself, waits until every
	// pipelined request has been answered and written. Zero serves one
	// request per connection at a time, as a Kafka broker does; a proxy
	// in front of brokers can let a client's requests through as it sends
	// them (Kafka's clients keep up to
	// max.in.flight.requests.per.connection, 5 by default, in flight),
	// the broker behind it keeping their order. Everything else is as for
	// a request served one at a time: limits, the memory budget (each
	// pipelined request holds its frame's memory until it is answered),
	// hooks, the request log, throttling (the connection is muted once
	// the throttled answer has been written) and draining (the pipelined
	// requests are answered before the connection closes). At most
	// [MaxPipeline].
	//
	// Experimental: proven by one host so far (examples/proxy); it may change
	// or go in a minor release, as CONTRIBUTING.md says.
	Pipeline int

	own      bool  // Inline is the server's own handler (ListClientConnectionsAPI, CloseClientConnectionsAPI): RequestDone.ServerAnswered
	flexible int16 // Raw: the first version whose headers are flexible (KIP-482); noFlexible when none is
}

// noFlexible is API.flexible for an API none of whose versions is
// flexible.
const noFlexible = math.MaxInt16

// enabled reports whether the table entry a is an API the listener
// accepts.
func (a *API) enabled() bool { return a.New != nil || a.Raw }

// Inline returns apis with h as the inline handler (API.Inline) of each:
// the inline mode, in which the server calls h on each connection's own
// goroutine for these APIs instead of queueing their requests for
// Server.Serve's workers. It suits requests a host answers at once, from memory
// (Metadata, ApiVersions taken over, a proxy's forwarding); requests that
// wait for something else (a long-poll Fetch, a group join) can still be
// answered later from another goroutine. An inline handler runs on a
// goroutine the server waits for, as a hook does (see [Hook]): Close and
// Shutdown, and the removal of its own listener, are called from a
// goroutine of its own.
func Inline(h Handler, apis ...API) []API {
	out := make([]API, len(apis))
	for i, a := range apis {
		a.Inline, a.own = h, false
		out[i] = a
	}
	return out
}

// Raw returns apis served raw (API.Raw): the server hands their requests
// to the host undecoded, as [Request.Raw], and the host may answer with
// bytes it already has, as a proxy answers with its upstream's response:
//
//	apis := socketserver.Raw(
//		socketserver.API{Key: 0, MinVersion: 3, MaxVersion: 13}, // Produce
//		socketserver.API{Key: 1, MinVersion: 4, MaxVersion: 18}, // Fetch
//	)
//	apis[0].StreamAbove = 1 << 20 // Produce frames over 1 MiB are streamed
//
// A whole listener is served raw by listing its APIs through Raw: the
// server still answers ApiVersions from that list, and the SASL exchange.
//
// Experimental: proven by one host so far (examples/proxy); it may change
// or go in a minor release, as CONTRIBUTING.md says.
func Raw(apis ...API) []API {
	out := make([]API, len(apis))
	for i, a := range apis {
		a.Raw = true
		out[i] = a
	}
	return out
}

// KeySetter is implemented by request types that can serve under any API
// key (connregistry.ListClientConnectionsRequest): the server calls SetKey
// with the frame's key before decoding, so the response's key matches.
type KeySetter interface {
	SetKey(int16)
}

// KmsgAPI returns the API for key as kmsg defines it, enabled for versions
// minVersion to maxVersion:
//
//	cfg.APIs = []socketserver.API{
//		socketserver.KmsgAPI(kmsg.Metadata, 0, 13),
//		socketserver.KmsgAPI(kmsg.Produce, 3, 12), // record batches; topics by name
//	}
//
// It panics when kmsg does not know key or cannot decode the range
// (minVersion below 0, maxVersion below minVersion or above kmsg's newest
// version of key): a mistake of the program, as regexp.MustCompile panics
// on a bad constant. A program that picks keys at run time (a proxy that
// serves its upstream's APIs) checks them first: kmsg.RequestForKey(key)
// is nil for a key kmsg does not know, and its MaxVersion is kmsg's
// newest.
//
// Which versions to enable. A client sends the newest version that it and
// the listener's ApiVersions answer both support, so the range is a
// promise: the host answers every version in it correctly, reading and
// filling each field the version has. Fields come and go with versions
// (kmsg's field comments say which: "// v13+"), and some change how a
// request reads, such as Produce v13 and Fetch v13, which name topics by
// id and not by name (KIP-516), and Metadata v10, which adds topic ids. So:
//
//   - maxVersion is the newest version the host has read about and
//     answers, never above kmsg's own newest (the MaxVersion of kmsg's
//     request type, as kmsg.NewPtrProduceRequest().MaxVersion(); 13 for
//     Produce, 18 for Fetch and 13 for Metadata in kmsg v1.15), which is
//     the newest kmsg decodes. A host that names topics only by name stops
//     Produce and Fetch at 12.
//   - minVersion is the oldest version the host answers. Produce before v3
//     and Fetch before v4 carry the old message sets instead of record
//     batches (magic 2), so a host that reads or stores record batches
//     starts there; other APIs can start at 0.
//
// What clients send: Kafka 4.x Java clients use Produce up to v12 (4.0)
// or v13 (4.1 on), Fetch up to v17 or v18, Metadata up to v13, and no
// longer send the versions Kafka 4.0 removed (KIP-896: Fetch before v4,
// ListOffsets v0, OffsetCommit before v2, among others); librdkafka,
// kafka-python, sarama and older Java clients send older versions, down to
// v0 of most APIs, so a wider range serves more clients. Any client whose
// range does not meet the listener's fails the request it cannot send.
// Kafka 4.x brokers still advertise Produce from v0 (KAFKA-18659: some
// librdkafka releases refuse to produce to a broker that does not) and
// reject v0 to v2 with UNSUPPORTED_VERSION; a host that needs those
// clients may do the same in its handler.
func KmsgAPI(key kmsg.Key, minVersion, maxVersion int16) API {
	k := key.Int16()
	req := kmsg.RequestForKey(k)
	if req == nil {
		panic(fmt.Sprintf("socketserver: KmsgAPI: kmsg does not know API key %d", key))
	}
	if minVersion < 0 || maxVersion < minVersion || maxVersion > req.MaxVersion() {
		panic(fmt.Sprintf("socketserver: KmsgAPI: %s versions %d to %d: kmsg decodes versions 0 to %d",
			kmsg.NameForKey(k), minVersion, maxVersion, req.MaxVersion()))
	}
	return API{Key: k, MinVersion: minVersion, MaxVersion: maxVersion, New: func() kmsg.Request { return kmsg.RequestForKey(k) }}
}

// apiVersionsMax is the newest ApiVersions version the server answers.
const apiVersionsMax = 4

// apiTable is the set of APIs one listener enables, indexed by key.
type apiTable struct {
	byKey []API // index = key; New == nil where disabled
	// streamAbove is the smallest API.StreamAbove of the listener's
	// APIs that stream; 0 when none does, and no frame's key is looked at
	// before it is read.
	streamAbove int
	// versions is the ApiVersions response's key list, ready to copy.
	versions []kmsg.ApiVersionsResponseApiKey
	// serverAnswersAPIVersions is false when the host listed ApiVersions
	// itself and answers it.
	serverAnswersAPIVersions bool
	// encodedVersions[v] is the body of the server's ApiVersions vN
	// answer to a valid request: the same for every connection.
	encodedVersions [apiVersionsMax + 1][]byte
}

// newAPITable builds a listener's table. ApiVersions is always enabled (the
// server answers it); a listed ApiVersions entry replaces the default range
// and lets the host answer it instead.
func newAPITable(apis []API) (*apiTable, error) {
	t := &apiTable{}
	all := slices.Clone(apis)
	if !slices.ContainsFunc(all, func(a API) bool { return a.Key == apiVersionsKey }) {
		t.serverAnswersAPIVersions = true
		all = append(all, API{Key: apiVersionsKey, MinVersion: 0, MaxVersion: apiVersionsMax,
			New: func() kmsg.Request { return kmsg.NewPtrApiVersionsRequest() }})
	}
	// The server answers the SASL exchange itself, on every listener, as
	// Kafka advertises it on every listener. librdkafka authenticates only if
	// SaslHandshake is advertised from v0.
	for _, sasl := range []API{
		{Key: saslHandshakeKey, MinVersion: 0, MaxVersion: 1, New: func() kmsg.Request { return kmsg.NewPtrSASLHandshakeRequest() }},
		{Key: saslAuthenticateKey, MinVersion: 0, MaxVersion: 2, New: func() kmsg.Request { return kmsg.NewPtrSASLAuthenticateRequest() }},
	} {
		if !slices.ContainsFunc(all, func(a API) bool { return a.Key == sasl.Key }) {
			all = append(all, sasl)
		}
	}
	for _, a := range all {
		if a.Key < 0 || a.MinVersion < 0 || a.MaxVersion < a.MinVersion || !a.enabled() {
			return nil, fmt.Errorf("socketserver: invalid API %+v: want key >= 0, 0 <= min <= max and New or Raw set", a)
		}
		if int(a.Key) < len(t.byKey) && t.byKey[a.Key].enabled() {
			return nil, fmt.Errorf("socketserver: API key %d listed twice", a.Key)
		}
		if err := a.checkRaw(); err != nil {
			return nil, err
		}
		if a.Raw {
			a.flexible = firstFlexible(a)
			if a.StreamAbove > 0 && (t.streamAbove == 0 || a.StreamAbove < t.streamAbove) {
				t.streamAbove = a.StreamAbove
			}
		}
		for int(a.Key) >= len(t.byKey) {
			t.byKey = append(t.byKey, API{})
		}
		t.byKey[a.Key] = a
	}
	for _, a := range t.byKey {
		if a.enabled() {
			k := kmsg.NewApiVersionsResponseApiKey()
			k.ApiKey, k.MinVersion, k.MaxVersion = a.Key, a.MinVersion, a.MaxVersion
			t.versions = append(t.versions, k)
		}
	}
	for v := range t.encodedVersions {
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version, resp.ApiKeys = int16(v), t.versions
		t.encodedVersions[v] = resp.AppendTo(nil)
	}
	return t, nil
}

// lookup returns the API for key, if enabled.
func (t *apiTable) lookup(key int16) (API, bool) {
	if key < 0 || int(key) >= len(t.byKey) || !t.byKey[key].enabled() {
		return API{}, false
	}
	return t.byKey[key], true
}

// MaxPipeline is the most requests of an API a connection may have in
// the host's hands at once (API.Pipeline).
//
// Experimental: proven by one host so far (examples/proxy); it may change
// or go in a minor release, as CONTRIBUTING.md says.
const MaxPipeline = 1024

// checkRaw refuses what cannot be served raw: the APIs the server answers
// itself, a key whose flexible versions nothing says, a stream threshold
// or a pipeline without Raw.
func (a *API) checkRaw() error {
	switch {
	case a.StreamAbove < 0:
		return fmt.Errorf("socketserver: API key %d: StreamAbove %d is negative", a.Key, a.StreamAbove)
	case a.StreamAbove > math.MaxInt32:
		return fmt.Errorf("socketserver: API key %d: StreamAbove %d is above %d, Kafka's largest frame", a.Key, a.StreamAbove, math.MaxInt32)
	case !a.Raw && a.StreamAbove > 0:
		return fmt.Errorf("socketserver: API key %d: StreamAbove is set but not Raw: only a raw API's frames are streamed", a.Key)
	case a.Pipeline < 0 || a.Pipeline > MaxPipeline:
		return fmt.Errorf("socketserver: API key %d: Pipeline %d: want 0 to %d", a.Key, a.Pipeline, MaxPipeline)
	case !a.Raw && a.Pipeline > 0:
		return fmt.Errorf("socketserver: API key %d: Pipeline is set but not Raw: only a raw API's requests are pipelined", a.Key)
	case !a.Raw:
		return nil
	case a.Key == apiVersionsKey || a.Key == saslHandshakeKey || a.Key == saslAuthenticateKey:
		return fmt.Errorf("socketserver: API key %d (%s) cannot be served raw: the server answers it itself", a.Key, apiName(a.Key))
	case a.own:
		return fmt.Errorf("socketserver: API key %d: %s cannot be served raw: the server answers it with a handler that decodes it", a.Key, ownAPIName(a))
	case a.New == nil && kmsg.RequestForKey(a.Key) == nil:
		return fmt.Errorf("socketserver: raw API key %d: kmsg does not know it; set New to a request type of that key, whose IsFlexible says which versions have flexible headers", a.Key)
	}
	return nil
}

// ownAPIName names the constructor of a, an API the server answers with a
// handler of its own, for errors.
func ownAPIName(a *API) string {
	if _, ok := a.New().(*connregistry.CloseClientConnectionsRequest); ok {
		return "CloseClientConnectionsAPI"
	}
	return "ListClientConnectionsAPI"
}

// firstFlexible returns the first version of a, a raw API, whose request
// and response headers are flexible (KIP-482; kmsg's request and response
// types agree on it, and a version once flexible stays so), from New's
// request type or kmsg's; noFlexible when none of its versions is.
func firstFlexible(a API) int16 {
	req := kmsg.RequestForKey(a.Key)
	if a.New != nil {
		req = a.New()
	}
	if req == nil {
		return noFlexible
	}
	for v := int16(0); v <= a.MaxVersion; v++ {
		req.SetVersion(v)
		if req.IsFlexible() {
			return v
		}
	}
	return noFlexible
}

// validSoftwareField reports whether s passes KIP-511's rule for
// ClientSoftwareName and ClientSoftwareVersion: alphanumerics, '-' and
// '.', starting and ending with an alphanumeric (Kafka's
// [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?).
func validSoftwareField[T string | []byte](s T) bool {
	alnum := func(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' }
	if len(s) == 0 || !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !alnum(c) && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

// parseClientSoftware reads the body of an ApiVersions v3+ request: two
// compact strings, ClientSoftwareName and ClientSoftwareVersion, then a tag
// section. The results share b's memory.
func parseClientSoftware(b []byte) (name, version []byte, err error) {
	compactString := func() ([]byte, error) {
		n, size := binary.Uvarint(b)
		if size <= 0 || n == 0 || n-1 > uint64(len(b)-size) { // 0 is null, which these fields may not be
			return nil, errors.New("bad compact string")
		}
		s := b[size : size+int(n-1)]
		b = b[size+int(n-1):]
		return s, nil
	}
	if name, err = compactString(); err != nil {
		return nil, nil, err
	}
	if version, err = compactString(); err != nil {
		return nil, nil, err
	}
	if _, err := skipTags(b); err != nil {
		return nil, nil, err
	}
	return name, version, nil
}

// validClientSoftware reports whether an ApiVersions request's client
// software fields pass KIP-511's check (which applies from v3 on).
func validClientSoftware(req *kmsg.ApiVersionsRequest) bool {
	return req.Version < 3 ||
		validSoftwareField(req.ClientSoftwareName) && validSoftwareField(req.ClientSoftwareVersion)
}

// apiVersionsResponse builds the server's answer to an ApiVersions request
// of the given version. A version above the newest it answers gets
// UNSUPPORTED_VERSION in the v0 layout, listing only ApiVersions' own range,
// so that any client can read it; invalid client software fields get
// INVALID_REQUEST.
func (t *apiTable) apiVersionsResponse(req *kmsg.ApiVersionsRequest, tooNew bool) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	if tooNew {
		a, _ := t.lookup(apiVersionsKey)
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = apiVersionsKey, a.MinVersion, a.MaxVersion
		resp.Version = 0
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{k}
		return resp
	}
	resp.Version = req.Version
	if !validClientSoftware(req) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	resp.ApiKeys = t.versions
	return resp
}
