// Command importer is a program of a kafkanet user, built by
// TestPluginsBuildForImporters outside the repository: it serves a
// listener with both plugins' hooks and prints the Prometheus metrics a
// connection left.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/plugin/knotel"
	"github.com/kafkanet/kafkanet/plugin/knprom"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/metric/noop"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	reg := prometheus.NewRegistry()
	prom, err := knprom.NewMetrics(reg)
	if err != nil {
		return err
	}
	otel, err := knotel.NewMetrics(noop.NewMeterProvider())
	if err != nil {
		return err
	}
	cfg, err := config.Server(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0"})
	if err != nil {
		return err
	}
	cfg.Hooks = append(cfg.Hooks, prom, otel)
	srv, err := socketserver.New(cfg)
	if err != nil {
		return err
	}
	if err := srv.Start(context.Background()); err != nil {
		return err
	}
	defer srv.Close()
	c, err := net.Dial("tcp", srv.Addr("PLAINTEXT").String())
	if err != nil {
		return err
	}
	c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		mfs, err := reg.Gather()
		if err != nil {
			return err
		}
		for _, mf := range mfs {
			if mf.GetName() == "kafka_server_socket_server_metrics_connection_close_total" {
				fmt.Println(mf.GetName())
				return nil
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	names := []string{}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	return fmt.Errorf("no connection-closed metric after a connection closed; metrics: %v", names)
}
