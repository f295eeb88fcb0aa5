// Command embed serves Kafka clients from a program of its own: ApiVersions
// (answered by the server), Metadata and ListClientConnections, on the
// listeners it is given, until SIGINT or SIGTERM.
//
// The flags are:
//
//	-listeners string
//		Kafka's listeners key (default PLAINTEXT://127.0.0.1:9092).
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
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
)

func main() {
	listeners := flag.String("listeners", "PLAINTEXT://127.0.0.1:9092", "Kafka's listeners key")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *listeners, log); err != nil {
		log.Error("stopped", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, listeners string, log *slog.Logger) error {
	// Listeners, checked with Kafka's rules, and the socket server's
	// settings at Kafka's defaults.
	cfg, err := config.Server(listener.Properties{"listeners": listeners})
	if err != nil {
		return err
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
