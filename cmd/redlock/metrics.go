package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// serveMetrics serves, at http://addr/metrics, the metrics of every engine
// of this process for Prometheus to scrape, through the OpenTelemetry
// Prometheus exporter. It sets the global meter provider, which engines use
// when given none: bench and torture build their engines (torture several)
// without knowing about it. The address actually bound (for port 0) is
// printed on stderr. stop shuts the server and the provider down.
func serveMetrics(addr string, stderr io.Writer) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %s: %w", addr, err)
	}
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("--metrics-addr: the Prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	otel.SetMeterProvider(mp)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(stderr, "redlock: metrics server: %v\n", err)
		}
	}()
	fmt.Fprintf(stderr, "redlock: serving metrics at http://%s/metrics\n", ln.Addr())
	return func() {
		_ = srv.Close()
		<-done
		_ = mp.Shutdown(context.Background())
	}, nil
}
