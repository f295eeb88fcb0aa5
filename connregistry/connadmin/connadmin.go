// Package connadmin lists a cluster's client connections through Kafka's
// ListClientConnections API (KIP-1329), and closes them through kafkanet's
// CloseClientConnections, with franz-go's kgo client. A broker knows only
// its own connections and kgo sends a custom API to one broker, so
// [Client.List] and [Client.CloseConnections] find the brokers through Metadata and
// ask each, keeping each broker's result and error apart.
package connadmin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/internal/topn"
)

// VersionsOpt returns the kgo option that lets the client send
// ListClientConnections, and CloseClientConnections, under the given keys
// (connregistry.DefaultListAPIKey and connregistry.DefaultCloseAPIKey unless
// the servers chose others): kgo refuses keys missing from its version
// table, and its table gives key 93 to another API.
func VersionsOpt(keys ...int16) kgo.Opt {
	vs := kversion.Stable()
	for _, key := range keys {
		vs.SetMaxKeyVersion(key, 0)
	}
	return kgo.MaxVersions(vs)
}

// Client lists and closes connections through a kgo client built with
// [VersionsOpt].
type Client struct {
	cl                *kgo.Client
	listKey, closeKey int16
}

// New returns a Client sending ListClientConnections under listKey and
// CloseClientConnections under closeKey (0 means
// connregistry.DefaultListAPIKey and connregistry.DefaultCloseAPIKey).
func New(cl *kgo.Client, listKey, closeKey int16) *Client {
	if listKey == 0 {
		listKey = connregistry.DefaultListAPIKey
	}
	if closeKey == 0 {
		closeKey = connregistry.DefaultCloseAPIKey
	}
	return &Client{cl: cl, listKey: listKey, closeKey: closeKey}
}

// BrokerResult is one broker's answer.
type BrokerResult struct {
	NodeID      int32
	Host        string
	Port        int32
	Connections []connregistry.ConnectionRecord
	// Err is the broker's failure: a transport error, or its error code as
	// a *kerr.Error (errors.Is(err, kerr.ClusterAuthorizationFailed) when
	// the client's principal may not describe the cluster) with the
	// broker's message, or ErrNotAdvertised when the broker does not serve
	// the client's key.
	Err error
}

// ErrorMessage wraps a broker's error code with the message it sent.
type ErrorMessage struct {
	Code    *kerr.Error
	Message string
}

// Error is the code's name with the broker's message, or with kerr's
// description of the code when the broker sent none.
func (e *ErrorMessage) Error() string {
	if e.Message == "" {
		return e.Code.Error()
	}
	return e.Code.Message + ": " + e.Message
}

// Unwrap returns the *kerr.Error.
func (e *ErrorMessage) Unwrap() error { return e.Code }

// ErrNotAdvertised is a broker's failure when its ApiVersions response
// does not list the key the Client sends ListClientConnections (or
// CloseClientConnections) under: the broker does not serve the API, or
// serves it under another key. The Client asks each broker for its API
// versions before it sends, so such a broker never sees the request (it
// would close the connection unanswered).
var ErrNotAdvertised = errors.New("connadmin: the broker does not advertise API key")

// List asks every broker of the cluster, found through a Metadata request,
// for its connections that match f, and with includeClosed its recently
// closed ones too, and returns their results ordered by node id. The
// brokers apply f's filters (ListClientConnections carries them), but its
// ConnectionIDs, which the Client applies to what they return. It fails as
// a whole only when the brokers cannot be found.
func (c *Client) List(ctx context.Context, f connregistry.Filter, includeClosed bool) ([]BrokerResult, error) {
	return c.everyBroker(ctx, func(nodeID int32) ([]connregistry.ConnectionRecord, error) {
		return c.listBroker(ctx, nodeID, f, includeClosed)
	})
}

// everyBroker finds the brokers through a Metadata request, calls ask for
// each at once and returns their results ordered by node id.
func (c *Client) everyBroker(ctx context.Context, ask func(nodeID int32) ([]connregistry.ConnectionRecord, error)) ([]BrokerResult, error) {
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, c.cl)
	if err != nil {
		return nil, fmt.Errorf("connadmin: finding the brokers: %w", err)
	}
	results := make([]BrokerResult, len(meta.Brokers))
	var wg sync.WaitGroup
	for i, b := range meta.Brokers {
		results[i] = BrokerResult{NodeID: b.NodeID, Host: b.Host, Port: b.Port}
		wg.Go(func() {
			results[i].Connections, results[i].Err = ask(b.NodeID)
		})
	}
	wg.Wait()
	slices.SortFunc(results, func(a, b BrokerResult) int { return cmp.Compare(a.NodeID, b.NodeID) })
	return results, nil
}

// CloseConnections asks every broker of the cluster, found through a Metadata
// request, to close its client connections that match f (at least one
// filter must be set: the servers refuse a request that would close every
// connection), sending CloseClientConnections under the Client's close key
// (the kgo client must be built with [VersionsOpt] naming it). Each result
// lists the connections that broker closed (never the one the request came
// on); a broker that refuses the client's principal fails with
// kerr.ClusterAuthorizationFailed (ALTER on CLUSTER is required). It fails
// as a whole only when the brokers cannot be found.
func (c *Client) CloseConnections(ctx context.Context, f connregistry.Filter) ([]BrokerResult, error) {
	key := c.closeKey
	return c.everyBroker(ctx, func(nodeID int32) ([]connregistry.ConnectionRecord, error) {
		req := &connregistry.CloseClientConnectionsRequest{APIKey: key, PrincipalFilter: f.Principal,
			ClientAddressFilter: f.ClientAddress, ListenerFilter: f.Listener, ConnectionIDs: f.ConnectionIDs, ServerNameFilter: f.ServerName}
		raw, err := c.send(ctx, nodeID, key, "CloseClientConnections", req)
		if err != nil {
			return nil, err
		}
		resp, ok := raw.(*connregistry.CloseClientConnectionsResponse)
		if !ok {
			return nil, errors.New("connadmin: unexpected response type")
		}
		if err := errorOf(resp.ErrorCode, resp.ErrorMessage); err != nil {
			return nil, err
		}
		return resp.Connections, nil
	})
}

// ListBroker asks one broker, as List asks each.
func (c *Client) ListBroker(ctx context.Context, nodeID int32, f connregistry.Filter, includeClosed bool) BrokerResult {
	conns, err := c.listBroker(ctx, nodeID, f, includeClosed)
	return BrokerResult{NodeID: nodeID, Connections: conns, Err: err}
}

func (c *Client) listBroker(ctx context.Context, nodeID int32, f connregistry.Filter, includeClosed bool) ([]connregistry.ConnectionRecord, error) {
	return c.ask(ctx, nodeID, f, &connregistry.ListClientConnectionsRequest{IncludeClosed: includeClosed})
}

// ListTop asks every broker of the cluster, as List does, for its first n
// open connections that match f in by's order (the busiest first; n <= 0:
// all of them, in that order), and returns each broker's, ordered by node
// id; [Top] merges them into the cluster's first n. A broker that
// predates the order (it ignores ListClientConnections' SortBy and Limit,
// and sends no rates) answers with all its connections: ListTop orders and
// cuts them itself, by what the broker sent. It fails as a whole only when
// the brokers cannot be found, or for a sort key that does not validate.
func (c *Client) ListTop(ctx context.Context, f connregistry.Filter, by connregistry.SortKey, n int) ([]BrokerResult, error) {
	if err := by.Validate(); err != nil {
		return nil, fmt.Errorf("connadmin: %w", err)
	}
	limit := int32(min(max(n, 0), math.MaxInt32))
	if f.ConnectionIDs != nil {
		limit = 0 // the ids are matched here, after the broker's answer: it must not cut first
	}
	return c.everyBroker(ctx, func(nodeID int32) ([]connregistry.ConnectionRecord, error) {
		recs, err := c.ask(ctx, nodeID, f, &connregistry.ListClientConnectionsRequest{SortBy: by, Limit: limit})
		if err != nil {
			return nil, err
		}
		return topOf(recs, by, n), nil
	})
}

// Ranked is a connection of a cluster's listing: its record and the node
// id of the broker it is on.
type Ranked struct {
	NodeID int32
	connregistry.ConnectionRecord
}

// Top merges the brokers' results (ListTop's) into the first n
// connections of the cluster in by's order (n <= 0: all of them), each
// with its broker, keeping n at a time in a bounded heap. The brokers'
// failures (BrokerResult.Err) are left to the caller; a sort key that
// does not validate merges nothing.
func Top(results []BrokerResult, by connregistry.SortKey, n int) []Ranked {
	order, ok := topn.Parse(string(by))
	if !ok {
		return nil
	}
	total := 0
	for _, r := range results {
		total += len(r.Connections)
	}
	if n <= 0 || n > total {
		n = total
	}
	if n == 0 {
		return []Ranked{}
	}
	h := topn.New(order, n)
	kept := make([]Ranked, n)
	for _, r := range results {
		for i := range r.Connections {
			k := key(&r.Connections[i])
			if slot := h.Offer(&k); slot >= 0 {
				kept[slot] = Ranked{NodeID: r.NodeID, ConnectionRecord: r.Connections[i]}
			}
		}
	}
	return kept[:h.Order(func(i, j int) { kept[i], kept[j] = kept[j], kept[i] })]
}

// topOf returns the first n of one broker's records in by's order (a
// valid key), all of them for n <= 0.
func topOf(recs []connregistry.ConnectionRecord, by connregistry.SortKey, n int) []connregistry.ConnectionRecord {
	ranked := Top([]BrokerResult{{Connections: recs}}, by, n)
	out := recs[:len(ranked)]
	for i := range ranked {
		out[i] = ranked[i].ConnectionRecord
	}
	return out
}

// key is what a record is ranked by; its times are in milliseconds.
func key(r *connregistry.ConnectionRecord) topn.Key {
	return topn.Key{RequestRate: r.RequestRate, BytesInRate: r.BytesInRate, BytesOutRate: r.BytesOutRate,
		LastActivity: r.LastActivity, ConnectedAt: r.ConnectedSince, ID: r.ConnectionID}
}

// ask sends req, with f's filters, to one broker and returns its
// connections that match f (the broker applies all but f.ConnectionIDs).
func (c *Client) ask(ctx context.Context, nodeID int32, f connregistry.Filter, req *connregistry.ListClientConnectionsRequest) ([]connregistry.ConnectionRecord, error) {
	req.APIKey, req.PrincipalFilter, req.ClientAddressFilter, req.ListenerFilter, req.ServerNameFilter = c.listKey,
		f.Principal, f.ClientAddress, f.Listener, f.ServerName
	raw, err := c.send(ctx, nodeID, c.listKey, "ListClientConnections", req)
	if err != nil {
		return nil, err
	}
	resp, ok := raw.(*connregistry.ListClientConnectionsResponse)
	if !ok {
		return nil, errors.New("connadmin: unexpected response type")
	}
	if err := errorOf(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return nil, err
	}
	if f.ConnectionIDs == nil {
		return resp.Connections, nil
	}
	return slices.DeleteFunc(resp.Connections, func(r connregistry.ConnectionRecord) bool {
		return !slices.Contains(f.ConnectionIDs, r.ConnectionID)
	}), nil
}

// send sends req, of the API named api under key, to one broker once the
// broker's ApiVersions response has listed key. A broker that does not
// know the key would close the connection without an answer, which a
// client sees only as EOF.
func (c *Client) send(ctx context.Context, nodeID int32, key int16, api string, req kmsg.Request) (kmsg.Response, error) {
	ok, err := c.advertises(ctx, nodeID, key)
	if err != nil {
		return nil, fmt.Errorf("connadmin: asking broker %d for its API versions: %w", nodeID, err)
	}
	if !ok {
		return nil, fmt.Errorf("%w %d, under which this client sends %s", ErrNotAdvertised, key, api)
	}
	return c.cl.Broker(int(nodeID)).RetriableRequest(ctx, req)
}

// errorOf turns a response's error code and message into an
// *ErrorMessage, nil for code 0.
func errorOf(code int16, message *string) error {
	if code == 0 {
		return nil
	}
	kind, _ := kerr.ErrorForCode(code).(*kerr.Error)
	if kind == nil {
		kind = &kerr.Error{Message: fmt.Sprintf("UNKNOWN_ERROR_%d", code), Code: code}
	}
	msg := ""
	if message != nil {
		msg = *message
	}
	return &ErrorMessage{Code: kind, Message: msg}
}

// advertises asks the broker whether its ApiVersions response lists key.
// The request carries the client's own software name and version, which
// the broker records for the connection (KIP-511).
func (c *Client) advertises(ctx context.Context, nodeID int32, key int16) (bool, error) {
	req := kmsg.NewPtrApiVersionsRequest()
	if v := c.cl.OptValues(kgo.SoftwareNameAndVersion); len(v) == 2 {
		req.ClientSoftwareName, _ = v[0].(string)
		req.ClientSoftwareVersion, _ = v[1].(string)
	}
	resp, err := req.RequestWith(ctx, c.cl.Broker(int(nodeID)))
	if err != nil {
		return false, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return false, err
	}
	return slices.ContainsFunc(resp.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool { return k.ApiKey == key }), nil
}
