package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/handlers"
	"github.com/flashline/flashline/postgres"
	"github.com/flashline/flashline/stack"
)

const saleUsage = `usage:
  flashline sale create --sku SKU (--stock N | --variants SKU:stock[:title],…|@FILE)
                        [--title TEXT] [--image-url https://…]
                        [--limit 1] [--ttl 600] [--opens-at RFC3339]
                        [--admission direct|waiting_room] [--buckets 1]
                        [--fairness randomized_at_open|arrival_order] [--challenge-bits 0]
                        [--per-instrument-limit 0] [--min-account-age-seconds 0]
                        [--confirmation payment|customer] [--gate none|redis]
  flashline sale open|pause|resume|close|show SALE_ID [--operator NAME]
      print the sale object of the admin API as JSON. A state change is
      recorded under the operator (default: $USER, else "admin"). A gated
      sale (--gate redis) needs FLASHLINE_REDIS_URL (--redis-url) to be
      created, shown with its counter or resumed.
  flashline sale report SALE_ID [--csv]
      the report after the sale, as the console's report page shows it: the
      timeline (made, opened, sold out, operators' actions, incidents), units
      by outcome, the crowd, the time to sell out, late payments, voids.
      --csv: the timeline as CSV (at,event,by,note), figures first.
  flashline sale verify-draw SALE_ID [--url URL]
      check the sale's draw: the seed its policy reveals at the open against
      the commitment published before, and every admission the database
      records against the draw recomputed from (seed, sale, customer).
  flashline sale repair SALE_ID [--apply] [--operator NAME]
      a paused sale whose stock does not add up: show what the stock rows say,
      what the reservations and the ledger imply, and the correction (per
      bucket of each variant, in a sale with variants); --apply
      writes it (ledger 'repair' rows naming the operator, one transaction).
      The sale stays paused: resume it once 'flashline check' says ok (a gated
      sale: after 'flashline gate rebuild').

  A sale with variants (sizes, tiers, editions through one line):
    flashline sale create --sku drop-1 --admission waiting_room \
        --variants 'S:100:Small,M:100:Medium,L:100:Large'
  or --variants @variants.json, a JSON array as POST /admin/sales has it, for
  titles with commas or a variant's own --buckets:
    [{"sku": "S", "title": "Small", "stock": 100, "buckets": 2}, ...]
  sale show prints each variant's counts; sale report each one's sold, held
  and available.
`

func runSale(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, saleUsage)
		return fmt.Errorf("sale: a subcommand is required")
	}
	sub := args[0]
	if sub == "verify-draw" {
		return runVerifyDraw(ctx, args[1:], getenv, stdout, stderr)
	}
	e := newFlags("sale "+sub, getenv, stderr)
	e.FS.Usage = func() { fmt.Fprint(stderr, saleUsage); e.FS.PrintDefaults() }
	var dbURL, redisURL, opensAt, title, imageURL, variants string
	e.databaseURL(&dbURL)
	e.redisURL(&redisURL)
	var req handlers.CreateSaleRequest
	var stock, perInstrument int
	var priceAmount int64
	var priceCurrency string
	var apply, asCSV bool
	var operator string
	switch sub {
	case "create":
		e.FS.StringVar(&req.SKU, "sku", "", "the SKU on sale (required)")
		e.FS.IntVar(&stock, "stock", 0, "units on sale (required, unless --variants)")
		e.FS.StringVar(&variants, "variants", "", variantsHelp)
		e.FS.StringVar(&title, "title", "", "what the waiting-room page calls the product, 1-120 characters (empty: the SKU)")
		e.FS.StringVar(&imageURL, "image-url", "", "the product's picture on the waiting-room page, an https URL (empty: none)")
		e.FS.IntVar(&req.PerCustomerLimit, "limit", 1, "most units one customer may hold")
		e.FS.IntVar(&req.ReservationTTLSeconds, "ttl", 600, "seconds a reservation is held before it expires")
		e.FS.StringVar(&opensAt, "opens-at", "", "when the sale opens (RFC 3339); empty: now")
		e.FS.StringVar(&req.Admission, "admission", string(flashline.AdmissionDirect), "direct or waiting_room")
		e.FS.IntVar(&req.Buckets, "buckets", 1, "rows the stock is spread over")
		e.FS.StringVar(&req.Fairness, "fairness", string(flashline.FairnessRandomizedAtOpen), "waiting-room order: randomized_at_open or arrival_order")
		e.FS.IntVar(&req.ChallengeBits, "challenge-bits", 0, "proof of work asked before admission through the waiting room, 0-32 bits (0: none)")
		e.FS.IntVar(&perInstrument, "per-instrument-limit", 0, "most units one payment instrument may hold (0: no limit)")
		e.FS.IntVar(&req.MinAccountAgeSeconds, "min-account-age-seconds", 0, "refuse accounts younger than this (the token's acct_created claim)")
		e.FS.StringVar(&req.Confirmation, "confirmation", string(flashline.ConfirmByPayment), "who confirms holds: payment (a signed payment event; serve needs FLASHLINE_PAYMENT_WEBHOOK_SECRET) or customer")
		e.FS.StringVar(&req.Gate, "gate", string(flashline.GateNone), "none, or redis: a Redis counter in front of the stock rows (peak sales)")
		e.FS.Int64Var(&priceAmount, "price-amount", -1, "the unit's price in minor units (cents), which the payments that confirm holds must pay (-1: the sale states none)")
		e.FS.StringVar(&priceCurrency, "price-currency", "", "the price's currency, ISO 4217 (with --price-amount)")
	case "repair":
		e.FS.BoolVar(&apply, "apply", false, "write the correction (without it: only show the plan)")
		e.String(&operator, "operator", "USER", "", "who repairs, recorded with the correction (default: $USER)")
	case "open", "pause", "resume", "close":
		e.String(&operator, "operator", "USER", "", "who acts, recorded with the change (default: $USER, else admin)")
	case "report":
		e.FS.BoolVar(&asCSV, "csv", false, "write CSV")
	}
	// SALE_ID may come before the flags (`sale report SALE --csv`), as the
	// usage writes it: the flag package stops at the first argument.
	rest := args[1:]
	if len(rest) > 1 && !strings.HasPrefix(rest[0], "-") {
		rest = append(append([]string{}, rest[1:]...), rest[0])
	}
	if err := e.FS.Parse(rest); err != nil {
		return err
	}
	var saleID string
	switch sub {
	case "create":
		if e.FS.NArg() != 0 {
			return fmt.Errorf("sale create: unexpected argument %q", e.FS.Arg(0))
		}
		if err := variantsOrStock(e.FS, &req, stock, variants); err != nil {
			return fmt.Errorf("sale create: %w", err)
		}
		if title != "" {
			req.Title = &title
		}
		if imageURL != "" {
			req.ImageURL = &imageURL
		}
		if perInstrument != 0 {
			req.PerInstrumentLimit = &perInstrument
		}
		if priceAmount >= 0 || priceCurrency != "" {
			if priceAmount < 0 || priceCurrency == "" {
				return errors.New("sale create: --price-amount and --price-currency go together")
			}
			req.Price = &handlers.PriceRequest{Amount: &priceAmount, Currency: priceCurrency}
		}
		if opensAt != "" {
			t, err := time.Parse(time.RFC3339, opensAt)
			if err != nil {
				return fmt.Errorf("sale create: --opens-at must be RFC 3339, e.g. 2026-12-01T10:00:00Z")
			}
			req.OpensAt = &t
		}
	case "open", "pause", "resume", "close", "show", "repair", "report":
		if e.FS.NArg() != 1 {
			fmt.Fprint(stderr, saleUsage)
			return fmt.Errorf("sale %s: give exactly one SALE_ID", sub)
		}
		saleID = e.FS.Arg(0)
		if !flashline.ValidID(flashline.SaleIDPrefix, saleID) {
			return fmt.Errorf("sale %s: sale %q not found (a sale id is sale_ and 26 characters, as 'flashline sale create' prints)", sub, saleID)
		}
		if sub == "repair" && apply && operator == "" {
			return errors.New("sale repair --apply: name the operator (--operator NAME, or $USER)")
		}
		if operator != "" && sub != "repair" {
			if err := flashline.CheckOperator(operator); err != nil {
				return fmt.Errorf("sale %s: --operator: %w", sub, err)
			}
		}
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
		if n.Confirmation == flashline.ConfirmByPayment && getenv("FLASHLINE_PAYMENT_WEBHOOK_SECRET") == "" &&
			getenv("FLASHLINE_STRIPE_WEBHOOK_SECRET") == "" && getenv("FLASHLINE_ADYEN_HMAC_KEY") == "" {
			fmt.Fprintln(stderr, "flashline: note: this sale's holds are confirmed by signed payment events (POST /payments/events): serve needs FLASHLINE_PAYMENT_WEBHOOK_SECRET; without a payment integration use --confirmation customer")
		}
	}

	rdb, err := newRedis(redisURL)
	if err != nil {
		return err
	}
	if rdb != nil {
		defer rdb.Close()
	}
	name := "cli"
	if sub == "repair" {
		name = "repair"
	}
	pool, err := openPool(ctx, dbURL, name, getenv, stderr)
	if err != nil {
		return err
	}
	defer pool.Close()
	pg := postgres.NewStore(postgres.SinglePool(pool), postgres.Options{})
	store := stack.New(pg, stack.Options{Redis: rdb}).Store
	var sale flashline.Sale
	switch sub {
	case "create":
		sale, err = store.CreateSale(ctx, n)
	case "show":
		sale, err = store.Sale(ctx, saleID)
	case "repair":
		if operator == "" {
			operator = "unnamed" // the plan only: nothing is written
		}
		plan, err := pg.Repair(ctx, saleID, operator, apply)
		if err != nil {
			return err
		}
		printRepair(stdout, plan, apply)
		return nil
	case "report":
		rep, err := pg.Report(ctx, saleID)
		if err != nil {
			return err
		}
		if asCSV {
			return writeReportCSV(stdout, handlers.NewReportView(rep))
		}
		printReport(stdout, handlers.NewReportView(rep))
		return nil
	default:
		if operator != "" {
			ctx = flashline.WithOperator(ctx, operator)
		}
		sale, err = store.SetSaleState(ctx, saleID, flashline.SaleAction(sub))
	}
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(handlers.NewSaleView(sale))
}

// printRepair shows a repair plan per bucket, and what was done. A sale
// with variants has a VARIANT column first and each variant's total after
// its buckets; a sale without variants is shown as it always was.
func printRepair(w io.Writer, p flashline.RepairPlan, apply bool) {
	fmt.Fprintf(w, "Sale %s (%s): what each source says each bucket holds\n\n", p.SaleID, p.State)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	variants := p.VariantTotals()
	first := ""
	if len(variants) > 0 {
		first = "VARIANT\t"
	}
	fmt.Fprintln(tw, first+"BUCKET\tSTOCK ROW\tRESERVATIONS IMPLY\t(OPENING\t- HELD)\tLEDGER\tUNRECORDED\tCORRECTION\t")
	line := func(variant, label string, b flashline.RepairBucket) {
		if len(variants) > 0 {
			fmt.Fprintf(tw, "%s\t", variant)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%+d\t%+d\t\n", label, b.Stock, b.Implied, b.Opening, b.Held, b.Ledger, b.Unrecorded(), b.Correction())
	}
	for i, b := range p.Buckets {
		line(b.Variant, fmt.Sprint(b.Bucket), b)
		if b.Variant != "" && (i+1 == len(p.Buckets) || p.Buckets[i+1].Variant != b.Variant) {
			for _, v := range variants {
				if v.Variant == b.Variant {
					line(v.Variant, "total", v)
				}
			}
		}
	}
	line("", "total", p.Total())
	_ = tw.Flush()
	fmt.Fprintln(w, `
UNRECORDED = stock row - ledger: changes no ledger row records (a second write path;
'flashline incident show' names who made them). CORRECTION = reservations imply -
stock row: what the repair sets each stock row to.`)
	switch {
	case !p.Needed():
		fmt.Fprintln(w, "Nothing to repair: stock, reservations and ledger agree. Resume the sale with 'flashline sale resume "+p.SaleID+"'.")
	case p.Applied:
		fmt.Fprintf(w, "Applied by %s in one transaction: 'repair' ledger rows record the unrecorded changes and the\ncorrection; the stock rows now hold what the reservations imply. The sale stays paused:\nonce 'flashline check' says ok, resume it with 'flashline sale resume %s'.\n", p.Operator, p.SaleID)
	case !apply:
		fmt.Fprintf(w, "Nothing written. To write this correction: flashline sale repair %s --apply [--operator NAME]\n", p.SaleID)
	}
}

// runPayments is `flashline payments late [--all]`: the payments that came
// for holds that could no longer take them, to refund.
func runPayments(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	const usage = "usage: flashline payments late [--all]   late payments to refund (--all: refunded ones too)\n"
	if len(args) == 0 || args[0] != "late" {
		fmt.Fprint(stderr, usage)
		return errors.New("payments: the subcommand is late")
	}
	e := newFlags("payments late", getenv, stderr)
	var dbURL string
	var all bool
	e.databaseURL(&dbURL)
	e.FS.BoolVar(&all, "all", false, "list refunded late payments too")
	if err := e.FS.Parse(args[1:]); err != nil {
		return err
	}
	pool, err := openAdmin(ctx, dbURL, getenv, stderr)
	if err != nil {
		return err
	}
	defer pool.Close()
	late, err := postgres.NewStore(postgres.SinglePool(pool), postgres.Options{}).LatePayments(ctx, all, 500)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RECEIVED\tEVENT\tRESERVATION\tSALE\tPAYMENT\tAMOUNT\tREASON\tREFUNDED")
	for _, l := range late {
		amount := "-"
		if l.Amount != nil {
			amount = fmt.Sprintf("%d %s", *l.Amount, l.Currency)
		}
		refunded := "no"
		if l.RefundedAt != nil {
			refunded = stamp(*l.RefundedAt) + " (" + l.RefundEventID + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", stamp(l.ReceivedAt), l.EventID, l.ReservationID, l.SaleID, l.PaymentReference, amount, l.Reason, refunded)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d late payment(s)\n", len(late))
	return nil
}
