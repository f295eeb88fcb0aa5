// Command embed serves Kafka clients from a program of its own: ApiVersions
// and SASL authentication (answered by the server), Metadata and
// ListClientConnections, on the listeners it is given, until SIGINT or
// SIGTERM.
//
// Usage:
//
//	embed [-listeners listeners] [server.properties]
//
// server.properties holds Kafka's broker keys: listeners, their security
// and the users of their SASL mechanisms.
//
// The flags are:
//
//	-listeners string
//		Kafka's listeners key, when no server.properties sets it (default PLAINTEXT://127.0.0.1:9092).
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
	"github.com/kafkanet/kafkanet/socketserver"
)

func main() {
	listeners := flag.String("listeners", "PLAINTEXT://127.0.0.1:9092", "Kafka's listeners key, when no server.properties sets it")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	props := config.Properties{}
	if flag.NArg() > 0 {
		var err error
		if props, err = config.Load(flag.Arg(0)); err != nil {
			log.Error("stopped", "err", err)
			os.Exit(1)
		}
	}
	if _, ok := props["listeners"]; !ok {
		props["listeners"] = *listeners
	}
	if err := run(ctx, props, log); err != nil {
		log.Error("stopped", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, props config.Properties, log *slog.Logger) error {
	// Listeners, checked with Kafka's rules, each listener's TLS and SASL
	// settings, and the socket server's settings, over Kafka's defaults.
	cfg, err := config.Server(props)
	if err != nil {
		return err
	}
	// The users of each SASL listener's PLAIN and SCRAM mechanisms, from
	// its JAAS key (listener.name.<listener>.plain.sasl.jaas.config), and
	// their credential stores.
	lists, warnings, err := config.JAASUsers(props, cfg.Listeners)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		log.Warn(w.String())
	}
	users, err := security.NewJAASUsers(lists)
	if err != nil {
		return err
	}
	for name, store := range users.Stores() {
		cfg.PerListener[name].Credentials = store
	}
	cfg.APIs = []socketserver.API{
		socketserver.KmsgAPI(kmsg.Metadata, 0, 12),                                 // answered below
		socketserver.ListClientConnectionsAPI(connregistry.DefaultListAPIKey, nil), // answered by the server
	}
	cfg.Logger = log

	srv, err := socketserver.New(cfg)
	if err != nil {
		return err
	}
	if err := srv.Start(ctx); err != nil {
		return err
	}
	for _, l := range cfg.Listeners.All {
		log.Info("listening", "listener", l.Name, "addr", srv.Addr(l.Name))
	}

	// The request loop: Metadata names this server, node 0 and the
	// controller, on the listener each client came through; it has no
	// topics, so a topic asked for is UNKNOWN_TOPIC_OR_PARTITION.
	node := socketserver.SingleNode{NodeID: 0, ClusterID: "kafkanet-embed"}
	handler := socketserver.HandlerFunc(func(r *socketserver.Request) {
		req, ok := r.Body.(*kmsg.MetadataRequest)
		if !ok {
			_ = r.CloseConnection()
			return
		}
		_ = r.Respond(srv.SingleNodeMetadata(req, r.Conn.Listener, node))
	})
	served := make(chan error, 1)
	go func() {
		served <- srv.Serve(context.Background(), protocolmap.DataPlane, handler)
	}()

	<-ctx.Done() // a signal: answer what has arrived, then close
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return err
	}
	if err := <-served; !errors.Is(err, socketserver.ErrServerClosed) {
		return err
	}
	return nil
}
