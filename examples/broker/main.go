// Command broker is kafkanet's example broker: it serves Kafka clients from
// an in-memory store on listeners configured the way Apache Kafka's are.
// With -check it only resolves that configuration and prints one row per
// listener of each broker: where it binds, what it advertises, its
// security protocol, the request plane it feeds and whether brokers use it
// among themselves.
//
// Usage:
//
//	broker [-check] [-config server.properties] [-set key=value]... [-brokers N] [-metrics-addr host:port] [-tls-watch-interval d] [-log-level level] [-audit-log file]
//
// The flags are:
//
//	-check
//		Validate the configuration, print the listeners and exit.
//	-config file
//		Read the settings from the Java .properties file (re-read on
//		SIGHUP, see below).
//	-set key=value
//		Set a key over the file's settings; repeatable.
//	-brokers N
//		Run a cluster of N brokers in the one process (default 1, see
//		below).
//	-metrics-addr host:port
//		Serve Prometheus metrics at http://host:port/metrics.
//	-tls-watch-interval d
//		Read the TLS listeners' PEM files every d and reload those that
//		changed (default 10s; 0 reloads them only on SIGHUP).
//	-log-level level
//		Log at debug, info, warn or error (default info); at debug every
//		request is logged, as Kafka's kafka.request.logger does at DEBUG.
//	-audit-log file
//		Append the audit trail to file as JSON lines in the OCSF form
//		(see below); - writes it to standard error.
//
// The configuration is read from the Java .properties file given with
// -config, with each -set key=value laid over it, and keys set in neither
// take Kafka's defaults (listeners=PLAINTEXT://:9092 and so on). A key the
// broker does not read is ignored, without the warning Kafka gives: the
// config package has no list of the keys it knows. When neither
// -config nor -set is given, the broker instead uses built-in settings that
// show off KIP-103: four named listeners under their own names, a SASL
// listener for clients and PLAINTEXT ones for replication (the inter-broker
// listener), internal use and the control plane. CLIENT speaks
// SASL_PLAINTEXT with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 for two demo
// users, alice (password alice-secret) and bob (password bob-secret).
//
// The users of a SASL listener are the user_<name>="<password>" options of
// Kafka's PlainLoginModule in listener.name.<listener>.plain.sasl.jaas.config;
// they log in with every mechanism of sasl.enabled.mechanisms. An
// un-prefixed sasl.jaas.config is ignored with a warning, as in Kafka.
// OAUTHBEARER is configured as in Kafka: signed tokens validated against a
// JWKS when listener.name.<listener>.oauthbearer.sasl.server.callback.handler.class
// names Kafka's OAuthBearerValidatorCallbackHandler (with the
// sasl.oauthbearer.* keys), unsigned ones otherwise, with a warning at
// start; either way listener.name.<listener>.oauthbearer.sasl.jaas.config
// holds Kafka's OAuthBearerLoginModule.
//
// With -check the broker only validates the configuration and prints the
// table. It shows what the broker would advertise: a listener advertised
// with an empty host (every interface) as the machine's host name, as in
// Kafka; an advertised port 0 is the port the listener binds, known once it
// is bound. With -brokers N a BROKER column gives each row's node id. An
// invalid configuration is reported on standard error, naming the
// offending key, and the exit status is 1; nothing is bound. Bad flags
// (a negative -tls-watch-interval or a -metrics-addr that is not
// host:port among them) give exit status 2.
//
// Without -check the broker serves until SIGINT or SIGTERM, when it shuts
// down gracefully and exits 0: it stops accepting connections and answers
// the requests in flight for at most 10 s, then closes the connections
// still open, logging a warning, and exits 0 all the same, as Kafka's
// controlled shutdown does when it has to force a close. A SIGHUP that
// arrives while it starts is applied once it serves.
//
// The broker keeps its topics in memory and answers ApiVersions, Metadata,
// Produce, Fetch (with long polls), ListOffsets, InitProducerId, DescribeCluster, CreateTopics (with the
// topic configs of Kafka 4.x, refusing others with INVALID_CONFIG),
// DeleteTopics and the group coordinator's APIs on its data-plane
// listeners, and Metadata alone on a control-plane listener. The first
// FindCoordinator for a group creates __consumer_offsets.
// Every socket-server key applies (num.network.threads, queued.max.requests,
// socket.request.max.bytes, connections.max.idle.ms, the TLS and SASL
// keys, ...), as do num.io.threads, node.id (or broker.id), broker.rack,
// num.partitions, auto.create.topics.enable, delete.topic.enable,
// offsets.topic.num.partitions and offsets.topic.replication.factor.
//
// SIGHUP re-reads the -config file (with the -set values over it) and
// applies its TLS settings, connection quotas, SASL user lists and
// listeners. Each SSL and SASL_SSL listener takes its key and trust stores
// (and its other ssl.* keys) anew for new connections, while established
// connections go on; as in Kafka, a certificate whose subject DN differs
// from the one in force, or that lacks some of its subject alternative
// names, is refused unless ssl.allow.dn.changes or ssl.allow.san.changes
// (per listener with the listener.name.<listener>. prefix) allows it. The
// quotas (max.connections, max.connections.per.ip and
// max.connections.per.ip.overrides, max.connection.creation.rate, their
// listener.name.<listener>. forms, the per-address connection creation
// rates below, and the per-principal limits,
// kafkanet.max.connections.per.principal and its overrides, also per
// listener) apply to the next connection; existing connections stay.
// Added users can log in at once, removed users no more, and their open
// connections close when their session expires (connections.max.reauth.ms).
// Listeners (listeners, advertised.listeners,
// listener.security.protocol.map) change as Kafka changes them at run time
// (KIP-226): a listener added to listeners is bound and served with its
// own listener.name.<listener>. settings; one removed stops accepting and
// drains, each request in flight answered before its connection closes
// (at most 10 s); Metadata advertises the new advertised.listeners. The
// inter-broker and control-plane listeners, and an existing listener's
// protocol, address or other settings, change only on a restart. An
// invalid file (an invalid key store among them), or a listener change
// that needs a restart, is logged and changes nothing; other settings need
// a restart.
//
// The broker also reloads a TLS listener when the PEM files its
// ssl.keystore.location or ssl.truststore.location names change on disk,
// as when a certificate manager renews them or Kubernetes updates a mounted
// secret: it reads them every -tls-watch-interval (10 s; 0 turns this
// off) and applies them under the same rules.
//
// Per-address connection creation rates, which Kafka sets at run time as
// the connection_creation_rate quota of the ips entity (kafka-configs
// --entity-type ips), are two keys here:
// kafkanet.ip.connection.creation.rate is the default for every client
// address, and kafkanet.ip.connection.creation.rate.overrides gives single
// addresses their own, as a comma-separated list of address:rate in the
// syntax of max.connections.per.ip.overrides, for example
// kafkanet.ip.connection.creation.rate.overrides=10.0.0.7:5,192.168.1.9:0,2001:db8::1:20
// (IP addresses only, each once; a rate of 0 admits no connection from the
// address, 2147483647 exempts it). A connection beyond its address's rate
// is held for the throttle delay, then closed.
//
// Two connection controls of kafkanet's own apply too: limits per principal
// (kafkanet.max.connections.per.principal and
// kafkanet.max.connections.per.principal.overrides, for example
// User:alice:2;User:CN=bob,O=acme:10; also per listener), which close a
// connection over its principal's limit once it has authenticated, and a
// maximum connection age (kafkanet.connections.max.age.ms, with
// kafkanet.connections.max.age.jitter; also per listener, where -1 keeps a
// listener's connections), which closes a connection between requests
// once it is that old, so that clients reconnect through a load balancer.
// Operators list connections with ListClientConnections
// (kafkanet.list.client.connections.api.key, default 93) and close them
// with CloseClientConnections (kafkanet.close.client.connections.api.key,
// default 1093), as kafka-client-connections does, on every listener,
// behind super.users when it is set.
//
// The broker bounds its memory by default: queued.max.request.bytes
// (twice socket.request.max.bytes unless set) bounds the requests in hand,
// and unless the environment sets GOMEMLIMIT the broker sets the Go
// runtime's soft memory limit to twice that budget (of every broker of the
// process) plus the records its log holds, following the log, as a Kafka
// broker runs with a fixed heap; it logs the limit at start.
// kafkanet.memory.limit.bytes sets a fixed limit instead, and -1 none.
//
// Client quotas (producer_byte_rate, consumer_byte_rate and
// request_percentage per user and client id, with Kafka's precedence) start
// from kafkanet.client.quotas, for example
// kafkanet.client.quotas=clients/<default>:producer_byte_rate=1048576;users/alice:request_percentage=200,
// sampled over quota.window.num windows of quota.window.size.seconds, and
// change at run time through AlterClientQuotas and DescribeClientQuotas
// (super users only when super.users is set). A client over its quota is
// answered at once with a throttle time (KIP-219).
//
// -brokers N runs a cluster of N brokers in the one process, sharing their
// topics: broker i has node id node.id+i and binds and advertises each
// listener on its configured port + i*100 (a port 0 stays 0, an ephemeral
// port, and the port bound is advertised). Partition p is led by broker
// p mod N. -metrics-addr host:port serves Prometheus metrics at /metrics.
//
// -log-level debug, info, warn or error (default info) sets what the
// broker logs to standard error. At debug it also logs every request, one
// line each once it is done, with its principal, client id, API, version,
// request and response sizes and where its time went (msg=request), as
// Kafka's kafka.request.logger logs at DEBUG; at the other levels it keeps
// no request log at all.
//
// -audit-log file appends the brokers' audit trail to file (created with
// mode 0600 if missing; - is standard error), one JSON object a line in
// the form of the Open Cybersecurity Schema Framework (OCSF) 1.0.0, as
// Redpanda writes its audit log: logins and KIP-368 re-authentications,
// succeeded and failed (the principal, or the user name a failed PLAIN or
// SCRAM login tried, the mechanism, the listener, the client's address,
// the PROXY and TLS details), connections refused by the per-address
// connection quotas, a principal's connection limit or the PROXY rules,
// operators' CloseClientConnections (who, with which filter, how many),
// throttles begun, and AlterClientQuotas changes (who changed which
// entity how, or was refused). No password, token or proof is ever written. Events wait in a
// bounded queue so that a slow disk holds no client; events dropped when
// it is full are counted and reported in the log. Kafka has no audit log;
// see docs/audit-trail.md.
//
// OpenTelemetry is configured by the standard OTEL_* environment
// variables, as OpenTelemetry's SDKs read them. When
// OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
// OTEL_EXPORTER_OTLP_METRICS_ENDPOINT is set, the broker exports over OTLP
// a span per request and the socket server's metrics (plugin/knotel), each
// broker's with the scope attribute kafka.node.id:
// OTEL_EXPORTER_OTLP_PROTOCOL is http/protobuf (the default) or grpc
// (http/json for traces only), OTEL_SERVICE_NAME (default kafkanet-broker)
// and OTEL_RESOURCE_ATTRIBUTES describe the broker, OTEL_TRACES_EXPORTER or
// OTEL_METRICS_EXPORTER none turns one signal off and OTEL_SDK_DISABLED=true
// both; the exporters' other variables (headers, TLS files, timeouts,
// OTEL_TRACES_SAMPLER, OTEL_METRIC_EXPORT_INTERVAL, ...) apply as the Go
// SDK documents them. Without an endpoint nothing of OpenTelemetry runs. A
// variable the broker cannot use is reported naming it, with exit status 1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/examples/internal/auditlog"
	"github.com/kafkanet/kafkanet/examples/internal/loglevel"
	"github.com/kafkanet/kafkanet/examples/internal/otelenv"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/security"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// drainTimeout bounds the graceful shutdown and the drain of a listener a
// reload removes.
const drainTimeout = 10 * time.Second

// shutdownTimeout bounds the graceful shutdown: drainTimeout, a variable
// only so that a test can run out of it.
var shutdownTimeout = drainTimeout

// maxBrokers bounds -brokers.
const maxBrokers = 100

// The demo users of the built-in settings, on the CLIENT listener.
const defaultJAAS = config.PlainLoginModule + ` required user_alice="alice-secret" user_bob="bob-secret";`

// defaultProperties returns the settings the broker runs with when neither
// -config nor -set is given. They demonstrate KIP-103: clients connect to
// CLIENT, which speaks SASL_PLAINTEXT, while REPLICATION, INTERNAL and
// CONTROLLER speak PLAINTEXT under their own names; brokers replicate over
// REPLICATION and controller requests arrive on CONTROLLER, the control
// plane of KIP-291. CLIENT offers PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 to
// the demo users alice (alice-secret) and bob (bob-secret). Every listener
// binds the loopback interface, so the defaults expose nothing.
func defaultProperties() config.Properties {
	return config.Properties{
		config.KeyListeners:                                              "CLIENT://127.0.0.1:9092,REPLICATION://127.0.0.1:9093,INTERNAL://127.0.0.1:9094,CONTROLLER://127.0.0.1:9095",
		config.KeySecurityProtocolMap:                                    "CLIENT:SASL_PLAINTEXT,REPLICATION:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
		config.KeyInterBrokerListenerName:                                "REPLICATION",
		config.KeyControlPlaneListenerName:                               "CONTROLLER",
		config.KeySASLEnabledMechanisms:                                  "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		config.MechanismKey("CLIENT", "PLAIN", config.KeySASLJAASConfig): defaultJAAS,
	}
}

// options are the command's flags.
type options struct {
	check       bool
	configPath  string
	sets        config.Overrides
	brokers     int
	metricsAddr string
	tlsWatch    time.Duration
	logLevel    loglevel.Level
	auditLog    string
}

// flagSet defines the command's flags, into o, on a FlagSet that reports
// to stderr.
func flagSet(o *options, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&o.check, "check", false, "validate the configuration, print the listeners and exit")
	fs.StringVar(&o.configPath, "config", "", "read broker settings from the Java .properties `file` (re-read on SIGHUP for\n"+
		"the TLS settings, connection quotas, SASL users and listeners). Without -config and -set: built-in listeners, CLIENT on\n"+
		"127.0.0.1:9092 with SASL_PLAINTEXT (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) for the\n"+
		"demo users alice (password alice-secret) and bob (password bob-secret)")
	fs.Var(&o.sets, "set", "set configuration `key=value` over the file's settings (repeatable)")
	fs.IntVar(&o.brokers, "brokers", 1, "run a cluster of `N` brokers in this process, sharing their topics:\n"+
		"broker i has node id node.id+i and binds and advertises each listener on its\n"+
		"configured port + i*100 (port 0 stays 0: an ephemeral port, advertised as bound)")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://`host:port`/metrics")
	fs.DurationVar(&o.tlsWatch, "tls-watch-interval", security.DefaultTLSWatchInterval, "read the PEM files of the TLS listeners every `interval` and reload\n"+
		"those that changed (0: only on SIGHUP)")
	fs.Var(&o.logLevel, "log-level", loglevel.Usage)
	fs.StringVar(&o.auditLog, "audit-log", "", "append the audit trail (logins, refused connections, operators' closes,\n"+
		"throttles, client quota changes) to `file` as OCSF JSON lines; - for standard error")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: broker [-check] [-config server.properties] [-set key=value]... [-brokers N] [-metrics-addr host:port] [-tls-watch-interval d] [-log-level level] [-audit-log file]")
		fs.PrintDefaults()
		fmt.Fprintln(fs.Output(), otelenv.Usage)
	}
	return fs
}

// run is the whole command; it serves until ctx ends and returns the exit
// status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// SIGHUP is caught from the start: one that arrives while the broker
	// starts would otherwise kill it (the default action, exit status
	// 129). It waits in hup, and serve handles it once the broker serves.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	var o options
	fs := flagSet(&o, stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "broker: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	if o.brokers < 1 || o.brokers > maxBrokers {
		fmt.Fprintf(stderr, "broker: -brokers %d: want 1 to %d\n", o.brokers, maxBrokers)
		fs.Usage()
		return 2
	}
	if o.tlsWatch < 0 {
		fmt.Fprintf(stderr, "broker: -tls-watch-interval %v: want 0 (reload only on SIGHUP) or more\n", o.tlsWatch)
		fs.Usage()
		return 2
	}
	if o.metricsAddr != "" {
		if err := checkListenAddress(o.metricsAddr); err != nil {
			fmt.Fprintf(stderr, "broker: -metrics-addr %q: %v\n", o.metricsAddr, err)
			fs.Usage()
			return 2
		}
	}

	cfg, err := resolve(o.configPath, o.sets)
	var set brokerSettings
	if err == nil {
		set, err = readSettings(cfg)
	}
	var cfgs []*brokerConfig
	if err == nil {
		cfgs, err = brokerConfigs(cfg, o.brokers)
	}
	var otel otelenv.Config
	if err == nil {
		otel, err = otelenv.Read(os.Getenv)
	}
	if err != nil {
		fmt.Fprintf(stderr, "broker: %v\n", err)
		return 1
	}
	if err := printListeners(stdout, cfgs, set.nodeID); err != nil {
		fmt.Fprintf(stderr, "broker: %v\n", err)
		return 1
	}
	if o.check {
		for _, w := range set.jaasWarnings { // serving logs them instead
			fmt.Fprintf(stderr, "broker: warning: %s\n", w.String())
		}
		return 0
	}
	var load func() (*brokerConfig, error)
	if path := o.configPath; path != "" {
		load = func() (*brokerConfig, error) { return resolve(path, o.sets) }
	}
	logger := o.logLevel.Logger(stderr)
	audit, closeAudit, err := auditlog.Open(o.auditLog, stderr, auditProduct, logger)
	if err != nil {
		fmt.Fprintf(stderr, "broker: -audit-log: %v\n", err)
		return 1
	}
	defer closeAudit() // after serve: the brokers' Shutdown has written every event
	return serve(ctx, cfg.Properties(), o.brokers, o.metricsAddr, o.tlsWatch, load, hup, otel, logger, audit)
}

// onlyDrainTimeouts reports whether err, one broker's Shutdown error or
// several joined, is nothing but drains that ran out of time: another
// broker's failure beside them still makes the exit status 1.
func onlyDrainTimeouts(err error) bool {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			if !onlyDrainTimeouts(e) {
				return false
			}
		}
		return true
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// checkListenAddress checks addr as net.Listen("tcp", addr) does before it
// binds: host:port, the port a number from 0 to 65535 or a service name.
// The host is left to the bind, which looks a host name up.
func checkListenAddress(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		_, err = net.LookupPort("tcp", port)
	}
	return err
}

// auditProduct names the broker in its audit records.
const auditProduct = "kafkanet example broker"

// serve runs the brokers, the metrics server if metricsAddr is set, and
// OpenTelemetry's exporters if otel exports anything, with their audit
// trail written to audit unless it is nil, until ctx ends,
// then shuts them down. On each SIGHUP hup delivers, those that arrived
// while the brokers started included, it reloads the TLS settings,
// connection quotas, SASL users and listeners from the configuration load
// returns (see cluster.reload); every tlsWatch it reloads the TLS
// listeners whose PEM files changed (see cluster.watchTLS). It returns the
// exit status: 0 once the brokers have stopped, even if the drain ran out
// of time and they closed the connections left, as Kafka's controlled
// shutdown exits 0 when it has to force a close.
func serve(ctx context.Context, props config.Properties, brokers int, metricsAddr string, tlsWatch time.Duration, load func() (*brokerConfig, error),
	hup <-chan os.Signal, otel otelenv.Config, logger *slog.Logger, audit *auditlog.Writer) int {
	var metricsLn net.Listener
	if metricsAddr != "" {
		var err error
		if metricsLn, err = net.Listen("tcp", metricsAddr); err != nil {
			logger.Error("cannot serve metrics (-metrics-addr)", "addr", metricsAddr, "err", err)
			return 1
		}
	}
	tel, err := otelenv.Start(ctx, otel, "kafkanet-broker", logger)
	defer tel.Close(logger) // after the brokers' shutdown: their last requests are exported
	var c *cluster
	if err == nil {
		var opts []clusterOption
		if audit != nil {
			opts = append(opts, withAuditLog(audit))
		}
		c, err = startCluster(ctx, props, brokers, logger, tel, opts...)
	}
	if err != nil {
		if metricsLn != nil {
			metricsLn.Close()
		}
		logger.Error("cannot start", "err", err)
		return 1
	}
	c.watchTLS(c.brokers[0].cfg, tlsWatch)
	limit := startMemoryLimit(c, logger)
	defer limit.close()
	var metrics *metricsServer
	if metricsLn != nil {
		metrics = serveMetrics(metricsLn, c.registry)
		logger.Info("serving metrics", "url", "http://"+metricsLn.Addr().String()+"/metrics")
	}
	logger.Info("started", "brokers", brokers, "cluster_id", c.id)

	for ctx.Err() == nil {
		select {
		case <-hup:
			logger.Info("SIGHUP: reloading the TLS settings, connection quotas, SASL users and listeners")
			_ = c.reload(ctx, load) // logged
		case <-ctx.Done():
		}
	}
	logger.Info("shutting down", "timeout", shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	code := 0
	switch err := c.Shutdown(sctx); {
	case err != nil && onlyDrainTimeouts(err):
		logger.Warn("shutdown: the drain ran out of time; the connections still open were closed", "timeout", shutdownTimeout, "err", err)
	case err != nil:
		logger.Error("shutdown", "err", err)
		code = 1
	}
	if metrics != nil {
		_ = metrics.Shutdown(sctx)
	}
	logger.Info("stopped")
	return code
}

// resolve reads the configuration file at path, if any, lays sets over it
// and resolves the listeners. With neither a file nor settings it resolves
// defaultProperties.
func resolve(path string, sets []string) (*brokerConfig, error) {
	props := config.Properties{}
	switch {
	case path != "":
		p, err := config.Load(path)
		if err != nil {
			return nil, err
		}
		props = p
	case len(sets) == 0:
		props = defaultProperties()
	}
	props, err := props.With(sets...)
	if err != nil {
		return nil, err
	}
	return readBrokerConfig(props)
}

// printListeners writes the listeners of cfgs, broker i's with node id
// firstID+i, to w as an aligned table, one row per listener in the order
// of the listeners key, broker after broker, with a BROKER column when
// there are several. An advertised address of "-" means the listener is
// not in advertised.listeners; others are what the broker will advertise
// (see advertisedAddress).
func printListeners(w io.Writer, cfgs []*brokerConfig, firstID int32) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := "LISTENER\tBIND\tADVERTISED\tPROTOCOL\tPLANE\tINTER-BROKER"
	several := len(cfgs) > 1
	if several {
		header = "BROKER\t" + header
	}
	fmt.Fprintln(tw, header)
	for i, cfg := range cfgs {
		for _, l := range cfg.All {
			advertised := "-"
			if l.IsAdvertised() {
				advertised = advertisedAddress(l.Advertised)
			}
			interBroker := "-"
			if l.InterBroker {
				interBroker = "yes"
			}
			if several {
				fmt.Fprintf(tw, "%d\t", firstID+int32(i))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n",
				l.Name, l.Bind.Address(), advertised, l.SecurityProtocol, l.Plane, interBroker)
		}
	}
	return tw.Flush()
}

// advertisedAddress is the address the broker advertises for ep, as
// socketserver.Server.Broker makes it: an empty host (every interface) is
// the machine's host name, as in Kafka. A port 0 stays 0 here: the port
// advertised is the one bound, known only once the listener is bound.
func advertisedAddress(ep listener.EndPoint) string {
	if ep.Host == "" {
		if h, err := os.Hostname(); err == nil {
			ep.Host = h
		}
	}
	return ep.Address()
}
