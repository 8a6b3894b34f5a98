package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/flashline/flashline/handlers"
	"github.com/flashline/flashline/loadshed"
	"github.com/flashline/flashline/salecache"
	"github.com/flashline/flashline/waitroom"
	"github.com/flashline/flashline/waitroom/edge"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

// The roles of serve.
const (
	roleAll    = "all"
	roleOrigin = "origin"
	roleEdge   = "edge"
)

// edgeInFlight is the most requests an edge works on at once; more are
// answered 503 overloaded at once. An edge's work is CPU (a signature per
// ticket, a lookup per poll): the bound keeps a flood from queueing
// goroutines without end.
const edgeInFlight = 4096

// runEdge is serve --role edge: the waiting room without a database. It
// needs what verifies customers (the identity provider's public keys, or
// the customer JWT secret), the waiting-room keys and its origins, and
// never reads DATABASE_URL (nor falls back to the development database).
// With the provider's keys alone, an edge holds nothing that can mint a
// customer.
func runEdge(ctx context.Context, cfg serveConfig, stdout, stderr io.Writer) error {
	if cfg.jwtSecret == "" && !cfg.hasProvider() {
		return errors.New("serve: --role edge: FLASHLINE_CUSTOMER_ISSUER, FLASHLINE_CUSTOMER_JWKS_URL or FLASHLINE_JWT_SECRET must be set (the edge authenticates customers)")
	}
	if cfg.jwtSecret == "" && cfg.waitroomKeys == "" {
		return errors.New("serve: --role edge: FLASHLINE_WAITROOM_KEYS must be set, the same as the origins'")
	}
	if !cfg.demo && cfg.jwtSecret != "" && len(cfg.jwtSecret) < minSecretLen {
		return fmt.Errorf("serve: FLASHLINE_JWT_SECRET is %d bytes; it must be at least %d random bytes (only --demo allows development values)", len(cfg.jwtSecret), minSecretLen)
	}
	if cfg.waitroomKeys == "" && !cfg.demo {
		return errors.New("serve: --role edge: FLASHLINE_WAITROOM_KEYS must be set, the same as the origins'")
	}
	var origins []string
	for o := range strings.SplitSeq(cfg.origins, ",") {
		if o = strings.TrimSpace(o); o == "" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return fmt.Errorf("serve: --origin %q: want an origin's base URL, http(s)://host[:port]", o)
		}
		origins = append(origins, strings.TrimRight(o, "/"))
	}
	if len(origins) == 0 {
		return errors.New("serve: --role edge needs --origin (FLASHLINE_ORIGIN): the base URL of an instance with the database")
	}
	if err := checkClients(&cfg); err != nil {
		return err
	}
	if v := cfg.clockSkew; v != 0 {
		fmt.Fprintf(stderr, "flashline: TEST HOOK: this instance's clock is skewed by %s; never in production\n", v)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return serveEdge(ctx, cfg, origins, logger, stdout)
}

func serveEdge(ctx context.Context, cfg serveConfig, origins []string, logger *slog.Logger, _ io.Writer) error {
	now := time.Now
	if skew := cfg.clockSkew; skew != 0 {
		now = func() time.Time { return time.Now().Add(skew) }
	}
	keyring := roomtoken.DeriveKeyring(cfg.jwtSecret)
	if cfg.waitroomKeys != "" {
		var err error
		if keyring, err = roomtoken.ParseKeyring(cfg.waitroomKeys); err != nil {
			return fmt.Errorf("serve: --waitroom-keys: %w", err)
		}
		if cfg.jwtSecret != "" && keyring.Uses(cfg.jwtSecret) {
			return errors.New("serve: --waitroom-keys: a waiting-room key must be a secret of its own, not the JWT secret")
		}
	}
	// An edge serves no admin route: its admin token is one nobody knows.
	adminToken := cfg.adminToken
	if adminToken == "" {
		var b [32]byte
		rand.Read(b[:])
		adminToken = hex.EncodeToString(b[:])
	}
	verifier, err := newVerifier(ctx, cfg, adminToken, logger)
	if err != nil {
		return err
	}
	limiter, err := loadshed.New(loadshed.Options{InitialLimit: edgeInFlight, MinLimit: edgeInFlight, MaxLimit: edgeInFlight, QueueSize: -1, PollShare: 1})
	if err != nil {
		return err
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registry.MustRegister(verifierMetrics(verifier)...)

	client, err := edge.NewClient(keyring, edge.Options{Origins: origins, ID: cfg.edgeID, Logger: logger, Now: now})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flashline_edge_watermarks_age_seconds",
			Help: "How long ago this edge received its origins' watermarks (-1: never); past 3 it answers stale and admits nobody.",
		}, func() float64 { return client.Age().Seconds() }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "flashline_edge_syncs_total",
			Help: "Watermarks documents this edge has taken from its origins.",
		}, func() float64 { return float64(client.Syncs()) }),
	)
	// The sale cache reads the pulled document: an entry is trusted for a
	// second past the document's own lifetime, so that an edge that has lost
	// its origins says so (stale) within WatermarksTTL + 1 s.
	cache := salecache.New(client, salecache.Options{Logger: logger, Registry: registry, Now: now,
		RefreshInterval: 250 * time.Millisecond, StaleAfter: time.Second})
	clock := cache.Now
	keyring = keyring.WithClock(clock)
	room := waitroom.NewRoom(cache, client, keyring, nil, waitroom.Options{Logger: logger, Registry: registry, Now: clock})
	// A first pull before serving, so that an edge whose origin is up
	// starts warm; one that is not starts anyway and answers "stale".
	syncCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	if err := client.Sync(syncCtx); err != nil {
		logger.Warn("flashline: edge: no origin answers yet; serving stale until one does", "err", err)
	} else if err := cache.Load(syncCtx); err != nil {
		logger.Warn("flashline: edge: load", "err", err)
	}
	cancel()
	running := newParts(logger)
	// The edge's counts of its lines (the queue's analytics) join its
	// reports: its origins write them.
	running.startLoops(map[string]func(context.Context) error{"edge sync": client.Run, "sale cache": cache.Run, "room counts": room.RunCounts,
		"room lines": func(ctx context.Context) error { return room.RunQueuePublisher(ctx, client, client.ID(), logger) }})
	ln, metricsLn, err := listen(cfg)
	if err != nil {
		return errors.Join(err, running.stopWithin(cfg.shutdownTimeout))
	}
	running.addClose("listeners", func() { ln.Close(); closeIf(metricsLn) })
	draining := make(chan struct{})
	srv := newHTTPServer(handlers.EdgeRoutes(handlers.EdgeDeps{
		Room:             room,
		Edge:             client,
		Verifier:         verifier,
		Limiter:          limiter,
		Logger:           logger,
		Origins:          origins,
		CustomerInFlight: cfg.customerInFlight,
		InFlightPerAddr:  cfg.maxConnsPerAddr,
		TrustedProxies:   cfg.trustedProxies,
		MaxStreams:       cfg.maxStreams,
		Draining:         draining,
		Registry:         registry,
	}))
	srv.RegisterOnShutdown(func() { close(draining) })
	startHTTP(running, logger, srv, ln, metricsLn, registry, cfg.pprof)
	logger.Info("flashline: listening", "url", publicURL(ln.Addr()), "role", roleEdge, "edge_id", client.ID(), "origins", strings.Join(origins, ","))
	return serveUntilDone(ctx, cfg, logger, running)
}
