// Command proxy is a Kafka-protocol proxy built on kafkanet: it serves
// Kafka clients on kafkanet listeners and forwards their requests to an
// upstream Kafka cluster, so that clients only ever talk to the proxy.
//
// Usage:
//
//	proxy [-upstream HOST:PORT[,HOST:PORT]] [-config proxy.properties] [-set key=value]... [-tls-watch-interval d] [-log-level level] [-audit-log file] [-gomaxprocs n] [-sysmon-awake=false]
//
// The flags are:
//
//	-upstream host:port[,host:port]
//		The upstream cluster's bootstrap servers, the key
//		upstream.bootstrap.servers. Required unless proxy.virtual.clusters
//		configures virtual clusters (see below), which each name their
//		own; with both, this cluster serves the clients that ask for no
//		virtual cluster's server name.
//	-config file
//		Read the settings from the Java .properties file (re-read on
//		SIGHUP for the TLS settings and connection quotas).
//	-set key=value
//		Set a key over the file's settings; repeatable.
//	-tls-watch-interval d
//		Read the TLS listeners' PEM files every d and reload those that
//		changed (default 10s; 0 reloads them only on SIGHUP).
//	-log-level level
//		Log at debug, info, warn or error (default info); at debug every
//		request is logged, as Kafka's kafka.request.logger does at DEBUG.
//	-audit-log file
//		Append the audit trail to file as JSON lines in the OCSF form
//		(see below); - writes it to standard error.
//	-gomaxprocs n
//		Run Go code on at most n threads at once (GOMAXPROCS; default 1),
//		unless the environment sets GOMAXPROCS; 0 is Go's default, one
//		per CPU.
//	-sysmon-awake
//		Keep the Go runtime's monitor thread (sysmon) awake while the
//		proxy is idle, polling every 10 ms, rather than woken at each
//		burst of work (default true): the proxy executes itself again at
//		start, on Linux, with schedtrace=2147483647 added to GODEBUG,
//		unless GODEBUG sets schedtrace already. -sysmon-awake=false
//		leaves sysmon as Go runs it.
//
// The configuration is a Java .properties file with each -set laid over
// it; keys set nowhere take Kafka's defaults. The client side is
// configured with Kafka's broker keys: listeners (and
// advertised.listeners), listener.security.protocol.map, each listener's
// TLS (ssl.keystore.*, ssl.truststore.*, ssl.client.auth) and SASL
// (sasl.enabled.mechanisms; the users are the user_<name>="<password>"
// options of listener.name.<listener>.plain.sasl.jaas.config), the
// connection quotas (max.connections, max.connections.per.ip, ...,
// max.connection.creation.rate) and connection.failed.authentication.delay.ms
// (KIP-306). Authentication ends at the proxy: upstream, the proxy logs in
// with its own credentials, Kafka's client keys prefixed with upstream.
// (upstream.security.protocol, upstream.sasl.mechanism,
// upstream.sasl.username, upstream.sasl.password,
// upstream.ssl.truststore.location, upstream.ssl.keystore.location,
// upstream.ssl.endpoint.identification.algorithm). upstream.sasl.mechanism
// is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, PLAIN unless set: Kafka's
// default for sasl.mechanism, GSSAPI (Kerberos), is not supported.
//
// Each data listener is a bootstrap port, and each upstream broker gets a
// port of its own on it: proxy.broker.port.base plus the broker's node id
// (by default the listener's port + 1 + node id; ephemeral ports for a
// listener on port 0), unless proxy.broker.port.mapping (nodeId:port,...)
// gives it one; both may be set per listener with the
// listener.name.<listener>. prefix. Metadata, FindCoordinator and
// DescribeCluster responses, and the leader hints of Produce, name these
// ports, so that clients only learn proxy addresses; a request on a
// broker's port goes to that broker. Those are the only answers the proxy
// decodes: every other API is forwarded by its bytes, both ways, a large
// Produce body or answer moved socket to socket (splice, where neither
// side is TLS), and Fetch is offered up to version 15, before its answers
// named brokers.
//
// Virtual clusters serve more upstream clusters on the same TLS listeners,
// told apart by the TLS server name (SNI) the client asks for, as
// kroxylicious does: proxy.virtual.clusters lists them, and each has
// proxy.virtual.cluster.<name>.server.name, the name its clients bootstrap
// with, and proxy.virtual.cluster.<name>.upstream.bootstrap.servers (and
// optionally its own upstream client keys after
// proxy.virtual.cluster.<name>.upstream.). Its broker of node id N is
// advertised as broker-N.<server name> on the listener's own port, so
// that one port, one wildcard DNS record and one certificate (for the name
// and *.the name, per name with kafkanet.ssl.server.names) per cluster
// serve it; a connection goes to the cluster, and the broker, its server
// name says. With upstream.bootstrap.servers set too, clients asking for
// another name or none go to that default cluster by port; without it
// they are refused. docs/proxy.md describes the scheme.
//
// The proxy answers ApiVersions itself with the APIs and versions both it
// and every upstream broker support, and never forwards the SASL exchange.
// proxy.admin.listener.name names a listener for operators, where the
// proxy answers Metadata (as the only broker) and serves
// ListClientConnections (the proxy's client connections, KIP-1329) and
// CloseClientConnections (close by principal, address, listener or id),
// both behind super.users; kafka-client-connections speaks to it.
//
// When an upstream broker goes away, the client connections routed to it
// close, so that their clients reconnect and refresh their metadata; an
// upstream response that does not decode closes its client connection.
// SIGINT or SIGTERM drain the proxy as the broker drains (at most 10 s):
// requests in flight are forwarded and answered, then connections close.
//
// SIGHUP re-reads the configuration and applies the TLS settings of the
// client listeners (key and trust stores, and their other ssl.* keys) to
// new connections, while established ones go on; as in Kafka, a
// certificate for another subject DN, or without some of the names of the
// one in force, is refused unless ssl.allow.dn.changes or
// ssl.allow.san.changes allows it, and an invalid store is refused naming
// its key. It then applies the connection quotas (max.connections,
// max.connections.per.ip and its overrides, ..., and the per-principal
// limits kafkanet.max.connections.per.principal and its overrides, also
// per listener) to new connections. Other settings need a restart. A
// SIGHUP that comes while the proxy starts is held, and reloads once it
// serves. The proxy also reloads a TLS
// listener when the PEM files its ssl.keystore.location or
// ssl.truststore.location names change on disk, reading them every
// -tls-watch-interval (10 s; 0 turns this off).
// An invalid configuration is reported naming the key, with exit status 1;
// bad flags give exit status 2.
//
// -log-level debug, info, warn or error (default info) sets what the proxy
// logs to standard error. At debug it also logs every client request, one
// line each once it is done, with its principal, client id, API, version,
// request and response sizes and where its time went (msg=request), as
// Kafka's kafka.request.logger logs at DEBUG; at the other levels it keeps
// no request log at all.
//
// -audit-log file appends the proxy's audit trail to file (created with
// mode 0600 if missing; - is standard error), one JSON object a line in
// the form of the Open Cybersecurity Schema Framework (OCSF) 1.0.0, as the
// example broker writes its own: logins on the proxy's listeners and
// KIP-368 re-authentications, succeeded and failed (the principal, or the
// user name a failed PLAIN or SCRAM login tried, the mechanism, the
// listener, the client's address, the PROXY and TLS details), connections
// refused by the connection quotas, the per-principal limits or the PROXY
// rules, and those the proxy refuses itself (a TLS server name no cluster
// is served under), operators' CloseClientConnections on the admin
// listener (who, with which filter, how many), throttles begun, and what
// the proxy does of its own accord: each reload of its configuration
// (SIGHUP) or of a listener's TLS files, applied or refused, and the
// client connections it closes because their upstream broker went away.
// No password, token or proof is ever written. Events wait in a bounded
// queue so that a slow disk holds no client; events dropped when it is
// full are counted and reported in the log. See docs/audit-trail.md.
//
// The proxy sets the Go runtime up for a hop, whose cost is its work per
// request, most of it the runtime's waking of threads on a small machine:
// one P (-gomaxprocs), and sysmon kept awake (-sysmon-awake), which the
// runtime does only while GODEBUG sets schedtrace, its periodic scheduler
// trace: the trace's period is then 24.8 days from the machine's boot, so
// a machine up for longer sees one "SCHED ..." line on standard error at
// start. The proxy logs both settings at start. docs/proxy.md ("Cost")
// has the measurements.
//
// OpenTelemetry is configured by the standard OTEL_* environment
// variables, as OpenTelemetry's SDKs read them. When
// OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
// OTEL_EXPORTER_OTLP_METRICS_ENDPOINT is set, the proxy exports over OTLP a
// span per client request and the socket server's metrics
// (plugin/knotel): OTEL_EXPORTER_OTLP_PROTOCOL is http/protobuf (the
// default) or grpc (http/json for traces only), OTEL_SERVICE_NAME (default
// kafkanet-proxy) and OTEL_RESOURCE_ATTRIBUTES describe the proxy,
// OTEL_TRACES_EXPORTER or OTEL_METRICS_EXPORTER none turns one signal off
// and OTEL_SDK_DISABLED=true both; the exporters' other variables apply as
// the Go SDK documents them. Without an endpoint nothing of OpenTelemetry
// runs. A variable the proxy cannot use is reported naming it, with exit
// status 1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/examples/internal/auditlog"
	"github.com/kafkanet/kafkanet/examples/internal/loglevel"
	"github.com/kafkanet/kafkanet/examples/internal/otelenv"
	"github.com/kafkanet/kafkanet/security"
	"github.com/kafkanet/kafkanet/socketserver"
)

func main() {
	rs := settingsFor(os.Args[1:], os.Environ())
	if rs.reexec != nil {
		if err := reexec(rs.reexec); err != nil && !errors.Is(err, errors.ErrUnsupported) {
			fmt.Fprintf(os.Stderr, "proxy: cannot execute itself again to keep the Go runtime's monitor thread awake: %v; going on without\n", err)
		}
	}
	rs.apply()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

// shutdownTimeout bounds the graceful shutdown.
const shutdownTimeout = 10 * time.Second

// options are the command's flags.
type options struct {
	upstream   string
	configPath string
	tlsWatch   time.Duration
	sets       config.Overrides
	logLevel   loglevel.Level
	auditLog   string
	// The Go runtime's settings (runtime.go), applied by main before run.
	gomaxprocs  int
	sysmonAwake bool
}

// flagSet defines the command's flags, into o, on a FlagSet that reports
// to stderr.
func flagSet(o *options, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.upstream, "upstream", "", "the upstream cluster's bootstrap `servers`, host:port[,host:port] (the key "+keyUpstream+");\n"+
		"required unless "+keyVirtualClusters+" configures virtual clusters")
	fs.StringVar(&o.configPath, "config", "", "read settings from the Java .properties `file` (re-read on SIGHUP for the TLS settings and connection quotas)")
	o.tlsWatch = security.DefaultTLSWatchInterval
	fs.Var(atLeastZero[time.Duration]{&o.tlsWatch, parseDuration, "reload only on SIGHUP"}, "tls-watch-interval",
		"read the PEM files of the TLS listeners every `interval` and reload\n"+
			"those that changed (0: only on SIGHUP)")
	fs.Var(&o.sets, "set", "set configuration `key=value` over the file's settings (repeatable)")
	fs.Var(&o.logLevel, "log-level", loglevel.Usage)
	fs.StringVar(&o.auditLog, "audit-log", "", "append the audit trail (logins, refused connections, operators' closes,\n"+
		"throttles, the proxy's reloads and its own closes) to `file` as OCSF JSON lines; - for standard error")
	runtimeFlags(fs, o)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: proxy [-upstream HOST:PORT[,HOST:PORT]] [-config proxy.properties] [-set key=value]... [-tls-watch-interval d] [-log-level level]\n"+
			"             [-audit-log file] [-gomaxprocs n] [-sysmon-awake=false]")
		fs.PrintDefaults()
		fmt.Fprintln(fs.Output(), otelenv.Usage)
	}
	return fs
}

// atLeastZero is the value of a numeric flag that refuses a number below
// 0, to which the flag gives no meaning, as a bad flag is refused (exit
// status 2, the flag and the value named): parse reads the value, and
// zero says, for the message, what 0 means.
type atLeastZero[T int | time.Duration] struct {
	v     *T
	parse func(string) (T, error)
	zero  string
}

func (f atLeastZero[T]) String() string {
	if f.v == nil { // flag.PrintDefaults asks a zero value
		return ""
	}
	return fmt.Sprint(*f.v)
}

func (f atLeastZero[T]) Set(s string) error {
	v, err := f.parse(s)
	if err != nil {
		return err
	}
	if v < 0 {
		return fmt.Errorf("want 0 or more (0: %s)", f.zero)
	}
	*f.v = v
	return nil
}

// parseInt and parseDuration read a flag's value as the flag package's
// IntVar and DurationVar do, with their messages.
func parseInt(s string) (int, error) {
	v, err := strconv.ParseInt(s, 0, strconv.IntSize)
	if errors.Is(err, strconv.ErrRange) {
		return 0, errors.New("value out of range")
	} else if err != nil {
		return 0, errors.New("parse error")
	}
	return int(v), nil
}

func parseDuration(s string) (time.Duration, error) {
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New("parse error")
	}
	return v, nil
}

// run is the whole command: it serves until ctx ends and returns the exit
// status.
func run(ctx context.Context, args []string, stderr io.Writer) int {
	// SIGHUP is caught from the start: the proxy may wait
	// upstream.socket.connection.setup.timeout.ms for its upstream before
	// it serves, and a SIGHUP not caught ends a Go program. One sent
	// meanwhile waits here, and reloads once the proxy serves.
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
		fmt.Fprintf(stderr, "proxy: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	log := o.logLevel.Logger(stderr)
	log.Info("Go runtime", "gomaxprocs", runtime.GOMAXPROCS(0), "sysmon_awake", sysmonAwake(os.Getenv("GODEBUG")))
	cfg, err := resolve(o.configPath, o.sets, o.upstream)
	var otel otelenv.Config
	if err == nil {
		otel, err = otelenv.Read(os.Getenv)
	}
	var tel *otelenv.Telemetry
	if err == nil {
		tel, err = otelenv.Start(ctx, otel, "kafkanet-proxy", log)
	}
	defer tel.Close(log) // after the proxy's shutdown: its last requests are exported
	var audit *auditlog.Writer
	if err == nil {
		var closeAudit func() error
		if audit, closeAudit, err = auditlog.Open(o.auditLog, stderr, auditProduct, log); err != nil {
			err = fmt.Errorf("-audit-log: %w", err)
		} else {
			defer closeAudit() // after the proxy's shutdown: every event is written
		}
	}
	var p *proxy
	if err == nil {
		p, err = newProxy(ctx, cfg, log, tel, nil, audit)
	}
	if err != nil {
		fmt.Fprintf(stderr, "proxy: %v\n", err)
		return 1
	}
	if err := p.Start(ctx); err != nil {
		p.Close()
		fmt.Fprintf(stderr, "proxy: %v\n", err)
		return 1
	}
	for _, l := range cfg.All {
		log.Info("listening", "listener", l.Name, "addr", p.Addr(l.Name), "protocol", l.SecurityProtocol)
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve(context.Background()) }()
	p.watchTLS(o.tlsWatch)

	load := func() (*proxyConfig, error) { return resolve(o.configPath, o.sets, o.upstream) }
	for ctx.Err() == nil {
		select {
		case <-hup:
			log.Info("SIGHUP: reloading the TLS settings and connection quotas")
			_ = p.reload(load) // logged
		case <-ctx.Done():
		}
	}
	log.Info("shutting down", "timeout", shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	code := 0
	if err := p.Shutdown(sctx); err != nil {
		log.Error("shutdown", "err", err)
		code = 1
	}
	if err := <-served; err != nil && !errors.Is(err, socketserver.ErrServerClosed) {
		log.Error("serve", "err", err)
		code = 1
	}
	log.Info("stopped")
	return code
}

// auditProduct names the proxy in its audit records.
const auditProduct = "kafkanet example proxy"

// resolve reads the configuration file, if any, lays sets over it, sets
// the upstream bootstrap servers from -upstream, and resolves it.
func resolve(path string, sets []string, upstream string) (*proxyConfig, error) {
	props := config.Properties{}
	if path != "" {
		p, err := config.Load(path)
		if err != nil {
			return nil, err
		}
		props = p
	}
	props, err := props.With(sets...)
	if err != nil {
		return nil, err
	}
	if upstream != "" {
		props[keyUpstream] = upstream
	}
	return readProxyConfig(withProxyDefaults(props))
}
