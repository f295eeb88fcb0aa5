// Command kafka-client-connections lists the client connections of a Kafka
// cluster's brokers through the ListClientConnections API (KIP-1329), the
// command the KIP proposes, and closes them through kafkanet's
// CloseClientConnections:
//
//	go run ./examples/kafka-client-connections --bootstrap-server 127.0.0.1:9092 --list \
//	    [--principal User:alice] [--client-address 10.0.0.0/8] [--listener CLIENT] [--server-name '*.a.example.com'] \
//	    [--command-config client.properties] [--output table|json] [--include-closed] [--api-key 93] \
//	    [--sort-by requests|bytes-in|bytes-out|idle|age] [--top N]
//	go run ./examples/kafka-client-connections --bootstrap-server 127.0.0.1:9092 --close \
//	    [--principal User:alice] [--client-address 10.0.0.0/8] [--listener CLIENT] [--server-name NAME] [--connection-id ID]... \
//	    [--command-config client.properties] [--output table|json] [--close-api-key 1093]
//
// The flags are:
//
//	--bootstrap-server host:port[,host:port]
//		The brokers to connect to; required.
//	--list
//		List the connections.
//	--close
//		Close the connections the filters select (at least one filter),
//		but the command's own.
//	--principal Type:name
//		Only the connections of this principal, such as User:alice.
//	--client-address address
//		Only the connections from this IP address or CIDR prefix.
//	--listener name
//		Only the connections on this listener (any case).
//	--server-name name
//		Only the connections whose TLS server name is name (see below).
//	--connection-id id
//		With --close: only the connection with this id, as --list shows
//		it; repeatable.
//	--include-closed
//		With --list: also the recently closed connections, with when and
//		why they closed.
//	--sort-by requests|bytes-in|bytes-out|idle|age
//		With --list: the connections of every broker in one order, the
//		busiest first: by request rate, by rate of bytes received or
//		sent (each per second over about the last minute), the longest
//		idle first, or the oldest first.
//	--top N
//		With --list: only the first N connections of the cluster (N at
//		least 1) in --sort-by's order (requests unless given).
//	--command-config file
//		Read how to connect from the client properties file: Kafka's
//		client keys security.protocol, sasl.mechanism,
//		ssl.truststore.location, ssl.keystore.location and
//		ssl.endpoint.identification.algorithm, and librdkafka's keys
//		sasl.username and sasl.password for the SASL user (Kafka's Java
//		client takes it from sasl.jaas.config, which is not read).
//	--output table|json
//		The output's format (default table).
//	--api-key key
//		The API key the brokers serve ListClientConnections under, 0 to
//		32767 (default 93).
//	--close-api-key key
//		The API key the brokers serve CloseClientConnections under, 0 to
//		32767 (default 1093).
//
// Each flag may be written with one dash as well as two.
//
// Every broker of the cluster is asked (each knows only its own
// connections); with several brokers a BROKER column comes first. --close
// needs at least one filter, prints the connections each broker closed
// and needs ALTER on CLUSTER, and DESCRIBE, which --list needs, since it
// lists what it closes first (Kafka's ALTER implies DESCRIBE). It never closes
// the command's own connections: a broker spares only the one its request
// arrives on, so the command sends its requests under a client id of its
// own run, lists the connections the filters select first (with
// ListClientConnections, under --api-key), and closes those of other
// clients by their connection ids; a connection opened after the listing
// stays open. Filter values are checked before any broker is asked: one
// that does not parse is a bad flag. SERVER-NAME is the TLS server name
// the client asked for (SNI; "-" without one), and --server-name selects
// by it, kafkanet's filter
// beyond KIP-1329's (a name, "*.domain" for every name below a domain, ""
// for the connections without one). A connection the broker has muted for
// a throttle (KIP-219)
// shows when the throttle ends in THROTTLED-UNTIL, and with --output json
// the time it has been muted in all (ThrottleTimeMs). Behind a load
// balancer that sends the PROXY protocol, CLIENT-ADDRESS is the client's
// real address, and --output json gives the balancer's as ProxyAddress.
// REQ/S, IN-B/S and OUT-B/S are the connection's recent rates: requests,
// and bytes of requests and of responses, per second over about the last
// minute (--output json: RequestRate, BytesInRate, BytesOutRate); a
// broker that predates them shows 0. With --sort-by or --top the rows
// are the cluster's, in that order, each broker having sent its own
// first N (--output json: each broker's connections in that order, with
// their Rank in the cluster's); neither goes with --include-closed.
// The exit status is 1 when any broker failed: the other
// brokers' results are still printed, and the errors go to standard error.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/connregistry/connadmin"
	"github.com/kafkanet/kafkanet/examples/internal/clientprops"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	cancel()
	os.Exit(code)
}

type options struct {
	bootstrap     string
	list          bool
	close         bool
	principal     optional
	clientAddress optional
	listenerName  optional
	serverName    optional
	commandConfig string
	output        string
	includeClosed bool
	apiKey        int
	closeAPIKey   int
	connectionIDs repeated
	sortBy        optional
	top           int
}

// repeated is a string flag that may be given more than once.
type repeated []string

func (r *repeated) String() string { return strings.Join(*r, ",") }
func (r *repeated) Set(s string) error {
	*r = append(*r, s)
	return nil
}

// optional is a string flag that remembers whether it was given.
type optional struct {
	set   bool
	value string
}

func (o *optional) String() string { return o.value }
func (o *optional) Set(s string) error {
	o.set, o.value = true, s
	return nil
}
func (o *optional) ptr() *string {
	if !o.set {
		return nil
	}
	return &o.value
}

// flagSet defines the command's flags, into o, on a FlagSet that reports
// to stderr.
func flagSet(o *options, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("kafka-client-connections", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.bootstrap, "bootstrap-server", "", "comma-separated `host:port` list of brokers to connect to (required)")
	fs.BoolVar(&o.list, "list", false, "list the connections")
	fs.BoolVar(&o.close, "close", false, "close the connections the filters select (at least one filter; never the command's own; ALTER and DESCRIBE on CLUSTER)")
	fs.Var(&o.principal, "principal", "only connections of this `principal`, Type:name (e.g. User:alice)")
	fs.Var(&o.clientAddress, "client-address", "only connections from this IP `address` or CIDR prefix")
	fs.Var(&o.listenerName, "listener", "only connections on this `listener` (any case)")
	fs.Var(&o.serverName, "server-name", "only connections whose TLS server name (SNI) is this `name` (any case; *.example.com for every name below example.com; empty for the connections without one)")
	fs.StringVar(&o.commandConfig, "command-config", "", "client properties `file`: Kafka's security.protocol, sasl.mechanism, ssl.truststore.location, ssl.keystore.location, ssl.endpoint.identification.algorithm and librdkafka's sasl.username, sasl.password (sasl.jaas.config is not read)")
	fs.StringVar(&o.output, "output", "table", "`format`: table or json")
	fs.BoolVar(&o.includeClosed, "include-closed", false, "with --list: also list recently closed connections, with when and why they closed")
	fs.Var(&o.connectionIDs, "connection-id", "with --close: only the connection with this `id`, as --list shows it (repeatable)")
	fs.Var(&o.sortBy, "sort-by", "with --list: the cluster's connections in this `order`, the busiest first: requests, bytes-in, bytes-out (rates over about the last minute), idle (the longest idle first) or age (the oldest first)")
	fs.IntVar(&o.top, "top", 0, "with --list: only the first `N` connections of the cluster (N at least 1; all without --top) in --sort-by's order (requests unless given)")
	fs.IntVar(&o.apiKey, "api-key", int(connregistry.DefaultListAPIKey), "the API `key` the brokers serve ListClientConnections under, 0 to 32767")
	fs.IntVar(&o.closeAPIKey, "close-api-key", int(connregistry.DefaultCloseAPIKey), "the API `key` the brokers serve CloseClientConnections under, 0 to 32767")
	fs.Usage = func() { usage(fs) }
	return fs
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flagSet(&o, stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	var seeds []string
	for _, s := range strings.Split(o.bootstrap, ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "kafka-client-connections: unexpected argument %q\n", fs.Arg(0))
		return 2
	case len(seeds) == 0:
		fmt.Fprintln(stderr, "kafka-client-connections: --bootstrap-server is required")
		return 2
	case o.list == o.close:
		fmt.Fprintln(stderr, "kafka-client-connections: say --list or --close")
		return 2
	case o.close && !o.principal.set && !o.clientAddress.set && !o.listenerName.set && !o.serverName.set && len(o.connectionIDs) == 0:
		fmt.Fprintln(stderr, "kafka-client-connections: --close needs a filter: --principal, --client-address, --listener, --server-name or --connection-id")
		return 2
	case o.close && o.includeClosed, o.list && len(o.connectionIDs) > 0:
		fmt.Fprintln(stderr, "kafka-client-connections: --include-closed goes with --list, --connection-id with --close")
		return 2
	case o.sortBy.set && connregistry.SortKey(o.sortBy.value).Validate() != nil:
		fmt.Fprintf(stderr, "kafka-client-connections: --sort-by %q: it is requests, bytes-in, bytes-out, idle or age\n", o.sortBy.value)
		return 2
	case o.top < 0 || (o.top == 0 && given(fs, "top")):
		fmt.Fprintln(stderr, "kafka-client-connections: --top is at least 1")
		return 2
	case (o.sortBy.set || o.top > 0) && (o.close || o.includeClosed):
		fmt.Fprintln(stderr, "kafka-client-connections: --sort-by and --top go with --list, without --include-closed")
		return 2
	case o.output != "table" && o.output != "json":
		fmt.Fprintln(stderr, "kafka-client-connections: --output is table or json")
		return 2
	case o.apiKey < 0 || o.apiKey > maxAPIKey:
		fmt.Fprintf(stderr, "kafka-client-connections: --api-key %d: want 0 to %d\n", o.apiKey, maxAPIKey)
		return 2
	case o.closeAPIKey < 0 || o.closeAPIKey > maxAPIKey:
		fmt.Fprintf(stderr, "kafka-client-connections: --close-api-key %d: want 0 to %d\n", o.closeAPIKey, maxAPIKey)
		return 2
	}
	filter := connregistry.Filter{
		Principal: o.principal.ptr(), ClientAddress: o.clientAddress.ptr(), Listener: o.listenerName.ptr(),
		ServerName: o.serverName.ptr(),
	}
	if err := validateFilters(filter); err != nil {
		fmt.Fprintln(stderr, "kafka-client-connections:", err)
		return 2
	}
	clientID := newClientID()
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), connadmin.VersionsOpt(int16(o.apiKey), int16(o.closeAPIKey)),
		kgo.RequestRetries(2), kgo.RetryTimeout(10 * time.Second), kgo.ClientID(clientID)}
	var principal string
	if o.commandConfig != "" {
		props, err := config.Load(o.commandConfig)
		if err != nil {
			fmt.Fprintln(stderr, "kafka-client-connections:", err)
			return 1
		}
		sec, err := clientprops.Read(props, "")
		if err != nil {
			fmt.Fprintln(stderr, "kafka-client-connections:", err)
			return 1
		}
		opts, principal = append(opts, sec.KgoOpts()...), sec.Principal()
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fmt.Fprintln(stderr, "kafka-client-connections:", err)
		return 1
	}
	defer cl.Close()
	admin := connadmin.New(cl, int16(o.apiKey), int16(o.closeAPIKey))
	var (
		results []connadmin.BrokerResult
		ranked  []connadmin.Ranked // with --sort-by or --top: the cluster's order
	)
	switch {
	case o.close:
		filter.ConnectionIDs = o.connectionIDs
		results, err = closeOthers(ctx, admin, filter, clientID)
	case o.sortBy.set || o.top > 0:
		by := connregistry.SortByRequests
		if o.sortBy.set {
			by = connregistry.SortKey(o.sortBy.value)
		}
		results, err = admin.ListTop(ctx, filter, by, o.top)
		ranked = connadmin.Top(results, by, o.top)
	default:
		results, err = admin.List(ctx, filter, o.includeClosed)
	}
	if err != nil {
		fmt.Fprintln(stderr, "kafka-client-connections:", describe(err, principal, "the cluster", o.close))
		return 1
	}
	failed := false
	for _, r := range results {
		if r.Err != nil {
			failed = true
			fmt.Fprintf(stderr, "kafka-client-connections: broker %d (%s:%d): %s\n", r.NodeID, r.Host, r.Port, describe(r.Err, principal, fmt.Sprintf("broker %d", r.NodeID), o.close))
		}
	}
	sorted := ranked != nil
	if !sorted {
		ranked = inBrokerOrder(results)
	}
	if o.output == "json" {
		err = writeJSON(stdout, results, ranked, sorted)
	} else {
		err = writeTable(stdout, ranked, len(results) > 1, o.includeClosed)
	}
	if err != nil {
		fmt.Fprintln(stderr, "kafka-client-connections:", err)
		return 1
	}
	if failed {
		return 1
	}
	return 0
}

// maxAPIKey is the largest API key: keys are int16 on the wire.
const maxAPIKey = math.MaxInt16

// validateFilters checks each filter flag's value as the brokers would, so
// that a value that does not parse is a bad flag (exit status 2) rather
// than an INVALID_REQUEST from every broker after an empty table. The
// error names the flag.
func validateFilters(f connregistry.Filter) error {
	for _, one := range []struct {
		flag   string
		filter connregistry.Filter
	}{
		{"--principal", connregistry.Filter{Principal: f.Principal}},
		{"--client-address", connregistry.Filter{ClientAddress: f.ClientAddress}},
		{"--listener", connregistry.Filter{Listener: f.Listener}},
		{"--server-name", connregistry.Filter{ServerName: f.ServerName}},
	} {
		if err := one.filter.Validate(); err != nil {
			return fmt.Errorf("%s: %w", one.flag, err)
		}
	}
	return nil
}

// newClientID returns the client id of one run of the command, which its
// requests carry and the brokers' listings show (ClientId), so that
// --close can tell the run's own connections from others'.
func newClientID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "kafka-client-connections-" + hex.EncodeToString(b[:])
}

// listingError is a broker's failure to list the connections --close would
// have closed: the command closes nothing there.
type listingError struct{ err error }

func (e *listingError) Error() string { return "listing the connections to close: " + e.err.Error() }
func (e *listingError) Unwrap() error { return e.err }

// closeOthers closes, on every broker, the connections f selects but those
// of the command's own run (client id clientID), and returns what each
// broker closed. A broker spares only the connection a
// CloseClientConnections request arrives on, and its filters select by
// principal, address, listener, server name and connection id, not by
// client id; so the command lists the connections f selects, leaves out
// its own, and closes the rest by connection id (with f's filters too, so
// that a connection that changed in between is spared). A broker whose
// listing failed is given that failure and closes nothing.
func closeOthers(ctx context.Context, admin *connadmin.Client, f connregistry.Filter, clientID string) ([]connadmin.BrokerResult, error) {
	listed, err := admin.List(ctx, f, false)
	if err != nil {
		return nil, err
	}
	results := make([]connadmin.BrokerResult, len(listed))
	ids := []string{}
	for i, r := range listed {
		results[i] = connadmin.BrokerResult{NodeID: r.NodeID, Host: r.Host, Port: r.Port}
		if r.Err != nil {
			results[i].Err = &listingError{r.Err}
		}
		for _, c := range r.Connections {
			if c.ClientID != clientID {
				ids = append(ids, c.ConnectionID)
			}
		}
	}
	if len(ids) == 0 {
		// Nothing to close; and an empty list of ids would travel as no
		// filter at all.
		return results, nil
	}
	f.ConnectionIDs = ids // ids are unique across brokers: each holds its listener's address
	closed, err := admin.CloseConnections(ctx, f)
	if err != nil {
		return nil, err
	}
	for _, c := range closed {
		for i := range results {
			if results[i].NodeID == c.NodeID && results[i].Err == nil {
				results[i].Connections, results[i].Err = c.Connections, c.Err
			}
		}
	}
	return results, nil
}

// usage prints the flags as Kafka's tools write them, with two dashes.
func usage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprintln(w, "Usage: kafka-client-connections --bootstrap-server HOST:PORT --list|--close [options]")
	fs.VisitAll(func(f *flag.Flag) {
		name, help := flag.UnquoteUsage(f)
		fmt.Fprintf(w, "  --%s", f.Name)
		if name != "" {
			fmt.Fprintf(w, " %s", name)
		}
		fmt.Fprintf(w, "\n    \t%s", help)
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" { // zero values, as flag.PrintDefaults
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}

// describe says an authorization failure, and a key the broker does not
// serve, in plain words. Under --close a broker's failure may be its
// listing's (a *listingError): --close lists before it closes.
func describe(err error, principal, where string, closing bool) string {
	listing := errors.As(err, new(*listingError))
	if errors.Is(err, connadmin.ErrNotAdvertised) {
		if closing && !listing {
			return err.Error() + "; if the brokers serve CloseClientConnections under another key, give it with --close-api-key"
		}
		return err.Error() + "; if the brokers serve ListClientConnections under another key, give it with --api-key"
	}
	if errors.Is(err, kerr.ClusterAuthorizationFailed) {
		who := principal
		if who == "" {
			who = "this client's principal"
		}
		switch {
		case closing && listing:
			return fmt.Sprintf("not authorized: %s may not close connections on %s (ALTER on CLUSTER is required, and DESCRIBE to list them first): %v", who, where, err)
		case closing:
			return fmt.Sprintf("not authorized: %s may not close connections on %s (ALTER on CLUSTER is required): %v", who, where, err)
		}
		return fmt.Sprintf("not authorized: %s may not list connections on %s (DESCRIBE on CLUSTER is required): %v", who, where, err)
	}
	return err.Error()
}

// rfc3339 formats epoch milliseconds in UTC, or "-" when unknown.
func rfc3339(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339)
}

// rfc3339Millis formats epoch milliseconds in UTC to the millisecond (a
// throttle's end: throttles are short), or "-" when unset.
func rfc3339Millis(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// given reports whether the flag named name was on the command line.
func given(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

// inBrokerOrder returns the brokers' connections one broker after
// another, each broker's in the order it sent them.
func inBrokerOrder(results []connadmin.BrokerResult) []connadmin.Ranked {
	out := []connadmin.Ranked{}
	for _, r := range results {
		for _, c := range r.Connections {
			out = append(out, connadmin.Ranked{NodeID: r.NodeID, ConnectionRecord: c})
		}
	}
	return out
}

// rate formats a rate per second with two decimals.
func rate(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

func printTable(w io.Writer, results []connadmin.BrokerResult, includeClosed bool) error {
	return writeTable(w, inBrokerOrder(results), len(results) > 1, includeClosed)
}

// writeTable writes rows in their order, with a BROKER column when the
// cluster has several brokers.
func writeTable(w io.Writer, rows []connadmin.Ranked, several, includeClosed bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := "CONNECTION-ID\tPRINCIPAL\tCLIENT-ADDRESS\tPORT\tLISTENER\tPROTOCOL\tSERVER-NAME\tSOFTWARE\tCONNECTED-SINCE\tTHROTTLED-UNTIL\tREQ/S\tIN-B/S\tOUT-B/S"
	if several {
		header = "BROKER\t" + header
	}
	if includeClosed {
		header += "\tCLOSED-AT\tCLOSE-REASON"
	}
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		c := r.ConnectionRecord
		software := "-"
		if c.SoftwareName != "" || c.SoftwareVersion != "" {
			software = dash(c.SoftwareName) + "/" + dash(c.SoftwareVersion)
		}
		row := strings.Join([]string{c.ConnectionID, c.Principal, c.ClientAddress,
			strconv.Itoa(int(c.ClientPort)), c.ListenerName, c.SecurityProtocol, dash(c.ServerName), software, rfc3339(c.ConnectedSince),
			rfc3339Millis(c.ThrottledUntil), rate(c.RequestRate), rate(c.BytesInRate), rate(c.BytesOutRate)}, "\t")
		if several {
			row = strconv.Itoa(int(r.NodeID)) + "\t" + row
		}
		if includeClosed {
			row += "\t" + rfc3339(c.ClosedAt) + "\t" + strings.ReplaceAll(dash(c.CloseReason), " ", "-")
		}
		fmt.Fprintln(tw, row)
	}
	return tw.Flush()
}

// jsonConnection carries KIP-1329's field names, then the extras.
type jsonConnection struct {
	ConnectionID     string  `json:"ConnectionId"`
	Principal        string  `json:"Principal"`
	PrincipalType    string  `json:"PrincipalType"`
	ClientAddress    string  `json:"ClientAddress"`
	ClientPort       int32   `json:"ClientPort"`
	ListenerName     string  `json:"ListenerName"`
	SecurityProtocol string  `json:"SecurityProtocol"`
	SoftwareName     string  `json:"SoftwareName"`
	SoftwareVersion  string  `json:"SoftwareVersion"`
	ConnectedSince   string  `json:"ConnectedSince"`
	ClientID         string  `json:"ClientId,omitempty"`
	SASLMechanism    string  `json:"SaslMechanism,omitempty"`
	TLSVersion       string  `json:"TlsVersion,omitempty"`
	CipherSuite      string  `json:"CipherSuite,omitempty"`
	AuthenticatedAt  string  `json:"AuthenticatedAt,omitempty"`
	SessionExpiry    string  `json:"SessionExpiry,omitempty"`
	LastActivity     string  `json:"LastActivity,omitempty"`
	BytesIn          int64   `json:"BytesIn"`
	BytesOut         int64   `json:"BytesOut"`
	Requests         int64   `json:"Requests"`
	State            string  `json:"State,omitempty"`
	Plane            string  `json:"Plane,omitempty"`
	ClosedAt         string  `json:"ClosedAt,omitempty"`
	CloseReason      string  `json:"CloseReason,omitempty"`
	ThrottledUntil   string  `json:"ThrottledUntil,omitempty"`
	ThrottleTimeMs   int64   `json:"ThrottleTimeMs,omitempty"`
	ProxyAddress     string  `json:"ProxyAddress,omitempty"`
	ServerName       string  `json:"ServerName,omitempty"`
	RequestRate      float64 `json:"RequestRate"`
	BytesInRate      float64 `json:"BytesInRate"`
	BytesOutRate     float64 `json:"BytesOutRate"`
	// Rank is the connection's place in the cluster's order, from 1, with
	// --sort-by or --top.
	Rank int `json:"Rank,omitempty"`
}

type jsonBroker struct {
	BrokerID    int32            `json:"BrokerId"`
	Host        string           `json:"Host,omitempty"`
	Port        int32            `json:"Port,omitempty"`
	Error       string           `json:"Error,omitempty"`
	Connections []jsonConnection `json:"Connections"`
}

func optionalTime(ms int64) string {
	if ms <= 0 {
		return ""
	}
	return rfc3339(ms)
}

func optionalMillis(ms int64) string {
	if ms <= 0 {
		return ""
	}
	return rfc3339Millis(ms)
}

func printJSON(w io.Writer, results []connadmin.BrokerResult) error {
	return writeJSON(w, results, inBrokerOrder(results), false)
}

// writeJSON writes one object per broker, with its error, and its
// connections among rows, in rows' order; ranked numbers them by their
// place in rows.
func writeJSON(w io.Writer, results []connadmin.BrokerResult, rows []connadmin.Ranked, ranked bool) error {
	out := make([]jsonBroker, 0, len(results))
	index := map[int32]int{}
	for _, r := range results {
		b := jsonBroker{BrokerID: r.NodeID, Host: r.Host, Port: r.Port, Connections: []jsonConnection{}}
		if r.Err != nil {
			b.Error = r.Err.Error()
		}
		index[r.NodeID] = len(out)
		out = append(out, b)
	}
	for i, r := range rows {
		c := r.ConnectionRecord
		j := jsonConnection{
			ConnectionID: c.ConnectionID, Principal: c.Principal, PrincipalType: c.PrincipalType,
			ClientAddress: c.ClientAddress, ClientPort: c.ClientPort, ListenerName: c.ListenerName,
			SecurityProtocol: c.SecurityProtocol, SoftwareName: c.SoftwareName, SoftwareVersion: c.SoftwareVersion,
			ConnectedSince: rfc3339(c.ConnectedSince), ClientID: c.ClientID, SASLMechanism: c.SASLMechanism,
			TLSVersion: c.TLSVersion, CipherSuite: c.CipherSuite, AuthenticatedAt: optionalTime(c.AuthenticatedAt),
			SessionExpiry: optionalTime(c.SessionExpiry), LastActivity: optionalTime(c.LastActivity),
			BytesIn: c.BytesIn, BytesOut: c.BytesOut, Requests: c.Requests, State: c.State, Plane: c.Plane,
			ClosedAt: optionalTime(c.ClosedAt), CloseReason: c.CloseReason,
			ThrottledUntil: optionalMillis(c.ThrottledUntil), ThrottleTimeMs: c.ThrottleTimeMs,
			ProxyAddress: c.ProxyAddress, ServerName: c.ServerName,
			RequestRate: c.RequestRate, BytesInRate: c.BytesInRate, BytesOutRate: c.BytesOutRate,
		}
		if ranked {
			j.Rank = i + 1
		}
		b := &out[index[r.NodeID]]
		b.Connections = append(b.Connections, j)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
