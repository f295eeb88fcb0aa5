package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The broker's metrics are plugin/knprom's, under Kafka's names, each
// broker's labelled with its node_id (cluster.startBroker); this file
// serves them over HTTP.

// metricsServer serves reg at /metrics on ln until Shutdown.
type metricsServer struct {
	srv  *http.Server
	done chan struct{}
}

func serveMetrics(ln net.Listener, reg *prometheus.Registry) *metricsServer {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	m := &metricsServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		_ = m.srv.Serve(ln) // ends with ErrServerClosed
	}()
	return m
}

// Shutdown stops the metrics server, waiting for scrapes in progress until
// ctx ends.
func (m *metricsServer) Shutdown(ctx context.Context) error {
	err := m.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		_ = m.srv.Close()
	}
	<-m.done
	return err
}
