package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashline/flashline/handlers"
	"github.com/flashline/flashline/postgres"
	"github.com/flashline/flashline/stack"
)

const gateUsage = `usage:
  flashline gate show SALE_ID      how the sale's Redis counter stands against the database
  flashline gate rebuild SALE_ID   make a paused sale's counter again from the database
Prints JSON: the sale's gate view (show) or {"counter": N} (rebuild).
A rebuilt sale stays paused: resume it with 'flashline sale resume SALE_ID'.
`

// redisURL registers --redis-url.
func (e env) redisURL(p *string) {
	e.String(p, "redis-url", "FLASHLINE_REDIS_URL", "", "Redis of the gate of peak sales, e.g. redis://127.0.0.1:6379/0 (empty: none; gated sales then answer 503)")
}

// newRedis returns a client of url (nil for ""): it dials lazily, and every
// call is bounded by the gate's own timeout.
func newRedis(url string) (*redis.Client, error) {
	if url == "" {
		return nil, nil
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("--redis-url: %w", err)
	}
	opts.DialTimeout = time.Second
	// A connection that waits longer than the gate's bound fails closed.
	opts.PoolTimeout = 250 * time.Millisecond
	opts.ContextTimeoutEnabled = true
	// One quick retry (a pooled connection Redis closed), no more: a
	// Redis that is down is answered 503 at once.
	opts.MaxRetries, opts.MinRetryBackoff, opts.MaxRetryBackoff = 1, time.Millisecond, 10*time.Millisecond
	return redis.NewClient(opts), nil
}

func runGate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, gateUsage)
		return fmt.Errorf("gate: a subcommand is required")
	}
	sub := args[0]
	e := newFlags("gate "+sub, getenv, stderr)
	e.FS.Usage = func() { fmt.Fprint(stderr, gateUsage); e.FS.PrintDefaults() }
	var dbURL, redisURL string
	e.databaseURL(&dbURL)
	e.redisURL(&redisURL)
	if err := e.FS.Parse(args[1:]); err != nil {
		return err
	}
	if sub != "show" && sub != "rebuild" {
		fmt.Fprint(stderr, gateUsage)
		return fmt.Errorf("gate: unknown subcommand %q", sub)
	}
	if e.FS.NArg() != 1 {
		return fmt.Errorf("gate %s: give exactly one SALE_ID", sub)
	}
	if redisURL == "" {
		return fmt.Errorf("gate %s: FLASHLINE_REDIS_URL (--redis-url) must be set", sub)
	}
	rdb, err := newRedis(redisURL)
	if err != nil {
		return err
	}
	defer rdb.Close()
	pool, err := openAdmin(ctx, dbURL, getenv, stderr)
	if err != nil {
		return err
	}
	defer pool.Close()
	st := stack.New(postgres.NewStore(postgres.SinglePool(pool), postgres.Options{}), stack.Options{Redis: rdb})
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	saleID := e.FS.Arg(0)
	if sub == "rebuild" {
		counter, err := st.Gate.Rebuild(ctx, saleID)
		if err != nil {
			return err
		}
		return enc.Encode(map[string]int64{"counter": counter})
	}
	sale, err := st.Store.Sale(ctx, saleID)
	if err != nil {
		return err
	}
	return enc.Encode(handlers.NewGateView(sale))
}
