package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/handlers"
	"github.com/flashline/flashline/postgres"
)

const saleUsage = `usage:
  flashline sale create --sku SKU --stock N [--limit 1] [--ttl 600] [--opens-at RFC3339]
                        [--admission direct|waiting_room] [--buckets 1]
                        [--fairness randomized_at_open|arrival_order] [--challenge-bits 0]
                        [--per-instrument-limit 0] [--min-account-age-seconds 0]
                        [--gate none|redis]
  flashline sale open|pause|resume|close|show SALE_ID
Prints the sale object of the admin API as JSON. A gated sale (--gate redis)
needs FLASHLINE_REDIS_URL (--redis-url) to be created, shown with its counter
or resumed.
`

func runSale(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, saleUsage)
		return fmt.Errorf("sale: a subcommand is required")
	}
	sub := args[0]
	e := newFlags("sale "+sub, getenv, stderr)
	e.fs.Usage = func() { fmt.Fprint(stderr, saleUsage); e.fs.PrintDefaults() }
	var dbURL, redisURL, opensAt string
	e.databaseURL(&dbURL)
	e.redisURL(&redisURL)
	var req handlers.CreateSaleRequest
	var stock, perInstrument int
	if sub == "create" {
		e.fs.StringVar(&req.SKU, "sku", "", "the SKU on sale (required)")
		e.fs.IntVar(&stock, "stock", 0, "units on sale (required)")
		e.fs.IntVar(&req.PerCustomerLimit, "limit", 1, "most units one customer may hold")
		e.fs.IntVar(&req.ReservationTTLSeconds, "ttl", 600, "seconds a reservation is held before it expires")
		e.fs.StringVar(&opensAt, "opens-at", "", "when the sale opens (RFC 3339); empty: now")
		e.fs.StringVar(&req.Admission, "admission", string(flashline.AdmissionDirect), "direct or waiting_room")
		e.fs.IntVar(&req.Buckets, "buckets", 1, "rows the stock is spread over")
		e.fs.StringVar(&req.Fairness, "fairness", string(flashline.FairnessRandomizedAtOpen), "waiting-room order: randomized_at_open or arrival_order")
		e.fs.IntVar(&req.ChallengeBits, "challenge-bits", 0, "proof of work asked before admission through the waiting room, 0-32 bits (0: none)")
		e.fs.IntVar(&perInstrument, "per-instrument-limit", 0, "most units one payment instrument may hold (0: no limit)")
		e.fs.IntVar(&req.MinAccountAgeSeconds, "min-account-age-seconds", 0, "refuse accounts younger than this (the token's acct_created claim)")
		e.fs.StringVar(&req.Gate, "gate", string(flashline.GateNone), "none, or redis: a Redis counter in front of the stock rows (peak sales)")
	}
	if err := e.fs.Parse(args[1:]); err != nil {
		return err
	}
	var saleID string
	switch sub {
	case "create":
		if e.fs.NArg() != 0 {
			return fmt.Errorf("sale create: unexpected argument %q", e.fs.Arg(0))
		}
		req.InitialStock = &stock
		if perInstrument != 0 {
			req.PerInstrumentLimit = &perInstrument
		}
		if opensAt != "" {
			t, err := time.Parse(time.RFC3339, opensAt)
			if err != nil {
				return fmt.Errorf("sale create: --opens-at must be RFC 3339, e.g. 2026-12-01T10:00:00Z")
			}
			req.OpensAt = &t
		}
	case "open", "pause", "resume", "close", "show":
		if e.fs.NArg() != 1 {
			return fmt.Errorf("sale %s: give exactly one SALE_ID", sub)
		}
		saleID = e.fs.Arg(0)
	default:
		fmt.Fprint(stderr, saleUsage)
		return fmt.Errorf("sale: unknown subcommand %q", sub)
	}
	var n flashline.NewSale
	if sub == "create" {
		var err error
		if n, err = req.NewSale(); err != nil { // validate before connecting
			return fmt.Errorf("sale create: %w", err)
		}
	}

	rdb, err := newRedis(redisURL)
	if err != nil {
		return err
	}
	if rdb != nil {
		defer rdb.Close()
	}
	pool, err := openAdmin(ctx, dbURL, getenv, stderr)
	if err != nil {
		return err
	}
	defer pool.Close()
	pg := postgres.NewStore(postgres.SinglePool(pool))
	store := cliGate(rdb, pg).Wrap(pg)
	var sale flashline.Sale
	switch sub {
	case "create":
		sale, err = store.CreateSale(ctx, n)
	case "show":
		sale, err = store.Sale(ctx, saleID)
	default:
		sale, err = store.SetSaleState(ctx, saleID, flashline.SaleAction(sub))
	}
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(handlers.NewSaleView(sale))
}
