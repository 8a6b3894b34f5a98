package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashline/flashline/handlers"
)

// closeIf closes ln if there is one.
func closeIf(ln net.Listener) {
	if ln != nil {
		ln.Close()
	}
}

// startHTTP serves srv on ln, and the private mux (privateMux, with the
// profiler if withPprof) on metricsLn if there is one; a server that fails
// ends the service (running.failed). Stopping it drains the requests in
// flight.
func startHTTP(running *parts, logger *slog.Logger, srv *http.Server, ln, metricsLn net.Listener, registry *prometheus.Registry, withPprof bool) {
	failed := func(err error) {
		if !errors.Is(err, http.ErrServerClosed) {
			select {
			case running.failed <- fmt.Errorf("serve: %w", err):
			default:
			}
		}
	}
	if fb, ok := ln.(*firstByteListener); ok {
		srv.ConnState = fb.connState
		registerConnMetrics(registry, fb)
	}
	go func() { failed(srv.Serve(ln)) }()
	var metricsSrv *http.Server
	if metricsLn != nil {
		metricsSrv = newHTTPServer(privateMux(registry, withPprof))
		logger.Info("flashline: metrics", "url", publicURL(metricsLn.Addr())+"/metrics", "pprof", withPprof)
		go func() { failed(metricsSrv.Serve(metricsLn)) }()
	}
	running.add("http server", func(ctx context.Context) error {
		logger.Info("flashline: shutting down, draining in-flight requests")
		err := srv.Shutdown(ctx)
		if metricsSrv != nil {
			err = errors.Join(err, metricsSrv.Shutdown(ctx))
		}
		return err
	})
}

// registerConnMetrics exports what the listener holds and why it closed
// connections before serving them (firstByteListener).
func registerConnMetrics(registry *prometheus.Registry, fb *firstByteListener) {
	closed := func(reason string, n *atomic.Int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "flashline_http_connections_closed_total",
			Help:        "Client connections the listener closed: per_address (over --max-conns-per-addr, at accept), first_byte (no first byte within the wait of the moment), idle_full (the longest idle keep-alive one, to let a new one into a full server).",
			ConstLabels: prometheus.Labels{"reason": reason}}, func() float64 { return float64(n.Load()) })
	}
	registry.MustRegister(
		closed("per_address", &fb.refused), closed("first_byte", &fb.expired), closed("idle_full", &fb.evicted),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "flashline_http_connections_open",
			Help: "Client connections held (waiting for their first byte, served or idle), of --max-conns."},
			func() float64 { return float64(fb.held()) }),
	)
}

// serveUntilDone waits until ctx is done (the stop signal), or until a
// server or a background loop fails; then it stops every running part, the
// HTTP server's drain first, within cfg.shutdownTimeout.
func serveUntilDone(ctx context.Context, cfg serveConfig, logger *slog.Logger, running *parts) error {
	var failure error
	select {
	case failure = <-running.failed:
		logger.Warn("flashline: stopping: a part of the service failed", "err", failure)
	case <-ctx.Done():
	}
	err := errors.Join(failure, running.stopWithin(cfg.shutdownTimeout))
	if err != nil {
		logger.Warn("flashline: stopped", "err", err)
	} else {
		logger.Info("flashline: stopped")
	}
	return err
}

// privateMux is what --metrics-addr serves: /metrics, and with --pprof Go's
// profiler under /debug/pprof/ (CPU and allocation profiles of the running
// service; not its command line, which may hold secrets). The profiler is
// off by default: it has no auth, and a CPU profile or a trace costs the
// service while it runs, so whoever reaches the address could slow it.
func privateMux(registry *prometheus.Registry, withPprof bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", handlers.MetricsHandler(registry))
	if !withPprof {
		return mux
	}
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	return mux
}

// idleTimeout is how long a keep-alive connection may wait for its next
// request, and a new one for its first while the server has room (listen;
// less as it fills: firstByteWait).
const idleTimeout = time.Minute

// newHTTPServer returns a server with limits sized for a storefront: headers
// within 16 KiB (a JWT and the usual cookies fit many times over; Go's
// default, 1 MiB, lets one request hold a megabyte) that arrive within 10 s;
// the whole request within 15 s (bodies have their own, shorter deadline,
// handlers/json.go); an answer written within 30 s; an idle keep-alive
// connection closed after a minute. A client slow enough to hit these under
// a flood gets no answer, so they are generous; a slowloris holds a
// connection no longer than them.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		MaxHeaderBytes:    16 << 10,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       idleTimeout,
	}
}

// publicURL is the URL to print for a listener: a wildcard address is shown
// as localhost, which is what a user on the same machine types.
func publicURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// listen opens --addr, at most --max-conns connections served at once (each
// costs a goroutine and buffers; the rest wait to be accepted), at most
// --max-conns-per-addr of them from one address outside --trusted-proxies,
// and --metrics-addr when set (nil otherwise). The API's connections are
// accepted once their first byte arrives (firstBytes), within the idle
// timeout while the server has room and less as it fills: the header
// timeout runs from there.
func listen(cfg serveConfig) (ln, metricsLn net.Listener, err error) {
	if ln, err = net.Listen("tcp", cfg.addr); err != nil {
		return nil, nil, fmt.Errorf("listen on %s: %w", cfg.addr, err)
	}
	if cfg.metricsAddr != "" {
		if metricsLn, err = net.Listen("tcp", cfg.metricsAddr); err != nil {
			ln.Close()
			return nil, nil, fmt.Errorf("listen on %s: %w", cfg.metricsAddr, err)
		}
	}
	limits := connLimits{max: cfg.maxConns, perAddr: cfg.maxConnsPerAddr, trusted: cfg.trustedProxies,
		wait: idleTimeout, fullWait: fullFirstByteWait}
	return firstBytes(ln, limits), metricsLn, nil
}
