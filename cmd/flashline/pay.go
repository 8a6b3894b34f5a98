package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/client"
)

// runPay is `flashline pay`: sends one payment event for a reservation,
// signed with the payment webhook secret, as the payment provider would
// (for the demo, and to try the flow by hand). It prints the service's
// answer and fails on any answer but 200.
func runPay(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	e := newFlags("pay", getenv, stderr)
	var base, secret, reservation, typ, reference, eventID, currency, reason, instrument string
	var amount int64
	e.String(&base, "url", "FLASHLINE_URL", "http://localhost:8080", "the service's base URL")
	e.String(&secret, "secret", "FLASHLINE_PAYMENT_WEBHOOK_SECRET", "", "the payment webhook secret to sign with (required; `serve --demo` prints its development one)")
	e.FS.StringVar(&reservation, "reservation", "", "the reservation paid for (required)")
	e.FS.StringVar(&typ, "type", string(flashline.PaymentSucceeded), "payment.succeeded, payment.failed or refund.succeeded")
	e.FS.StringVar(&reference, "reference", "", `the payment's reference (default "pay_" + the reservation's ULID: the same payment every time)`)
	e.FS.StringVar(&eventID, "event-id", "", `the event's id (default a new "evt_" id: every run is a new event)`)
	e.FS.Int64Var(&amount, "amount", -1, "the amount in minor units, as the provider gives it (-1: none)")
	e.FS.StringVar(&currency, "currency", "", "the amount's currency, three letters")
	e.FS.StringVar(&reason, "reason", "", "a failure's or refund's reason")
	e.FS.StringVar(&instrument, "instrument", "", "the instrument that paid, as the provider reports it (payment.succeeded; counted by the sale's perInstrumentLimit)")
	if err := e.FS.Parse(args); err != nil {
		return err
	}
	if e.FS.NArg() != 0 {
		return fmt.Errorf("pay: unexpected argument %q", e.FS.Arg(0))
	}
	switch {
	case reservation == "" && secret == "":
		return errors.New("pay: --reservation and the payment webhook secret (FLASHLINE_PAYMENT_WEBHOOK_SECRET or --secret) are missing")
	case reservation == "":
		return errors.New("pay: --reservation is missing (or empty): the reservation to pay for, res_…")
	case secret == "":
		return errors.New("pay: the payment webhook secret is missing: set FLASHLINE_PAYMENT_WEBHOOK_SECRET or --secret (serve --demo prints its development one)")
	}
	if reference == "" {
		reference = "pay_" + strings.TrimPrefix(reservation, flashline.ReservationIDPrefix+"_")
	}
	if eventID == "" {
		eventID = flashline.NewID("evt")
	}
	ev := client.PaymentEvent{ID: eventID, Type: typ, Data: client.PaymentData{
		ReservationID: reservation, PaymentReference: reference, Currency: currency, Reason: reason,
		PaymentInstrument: instrument,
	}}
	if amount >= 0 {
		ev.Data.Amount = &amount
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := client.New(base, nil).SendPaymentEvent(ctx, time.Now(), ev, secret)
	if err != nil {
		return fmt.Errorf("pay: %w", err)
	}
	var pretty any
	if json.Unmarshal(res.Body, &pretty) == nil {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(pretty)
	} else {
		fmt.Fprintf(stdout, "%s\n", res.Body)
	}
	if res.Status != 200 {
		return fmt.Errorf("pay: the service answered %d %s", res.Status, res.Code())
	}
	return nil
}
