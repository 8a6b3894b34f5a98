package main

import (
	"errors"
	"fmt"
	"io"
	"time"
	"unicode/utf8"

	"github.com/flashline/flashline/auth"
)

// runToken is `flashline token`: mints a customer JWT signed with the
// service's secret, for the demo and for tests.
func runToken(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	e := newFlags("token", getenv, stderr)
	var secret, customer, instrument string
	var ttl, age time.Duration
	e.String(&secret, "jwt-secret", "FLASHLINE_JWT_SECRET", "", "HS256 secret (required)")
	e.FS.StringVar(&customer, "customer", "", "customer id, the token's sub (required)")
	e.FS.DurationVar(&ttl, "ttl", time.Hour, "how long the token is valid")
	e.FS.DurationVar(&age, "account-age", 0, "set acct_created this long ago (0: leave it out)")
	e.FS.StringVar(&instrument, "instrument", "", "set payment_instrument, the customer's payment instrument as the store's backend names it (empty: leave it out)")
	if err := e.FS.Parse(args); err != nil {
		return err
	}
	if secret == "" || customer == "" {
		return errors.New("token: --customer and FLASHLINE_JWT_SECRET (or --jwt-secret) are required")
	}
	if utf8.RuneCountInString(customer) > auth.MaxSubjectLen {
		return fmt.Errorf("token: --customer must be at most %d characters", auth.MaxSubjectLen)
	}
	var created time.Time
	if age > 0 {
		created = time.Now().Add(-age)
	}
	tok, err := auth.MintInstrument(secret, customer, ttl, created, instrument)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, tok)
	return nil
}
