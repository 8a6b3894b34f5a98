package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/flashline/flashline/postgres"
)

// runCheck is `flashline check`: the invariant of every sale, as a table. It
// only reads (the invariant job is what pauses a sale); the SQL is the
// sale_invariant view, which a DBA can query directly. STATE is the state the
// API shows (a scheduled sale whose time came is open, an open one with
// nothing left sold_out), not the stored one the view has. A sale with
// variants has a line for each under it (the sale_variant_invariant view),
// and is mismatched when one of them is.
func runCheck(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	e := newFlags("check", getenv, stderr)
	var dbURL string
	e.databaseURL(&dbURL)
	if err := e.FS.Parse(args); err != nil {
		return err
	}
	pool, err := openAdmin(ctx, dbURL, getenv, stderr)
	if err != nil {
		return err
	}
	defer pool.Close()
	rows, err := postgres.NewStore(postgres.SinglePool(pool), postgres.Options{}).SaleInvariants(ctx)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "SALE\tSTATE\tINITIAL\tAVAILABLE\tPENDING\tCONFIRMED\tEXPIRED\tCANCELLED\tVOIDED\tLEDGER\tOK\t")
	bad := 0
	verdict := map[bool]string{true: "ok", false: "MISMATCH"}
	for _, r := range rows {
		// A sale adds up only if each of its variants does too: the
		// invariant job pauses it for one that does not.
		ok := r.OK
		for _, v := range r.Variants {
			ok = ok && v.OK
		}
		if !ok {
			bad++
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", r.SaleID, r.State, r.InitialStock,
			r.Available, r.Pending, r.Confirmed, r.Expired, r.Cancelled, r.Voided, r.LedgerTotal, verdict[ok])
		for _, v := range r.Variants {
			fmt.Fprintf(tw, "variant %s\t\t%d\t%d\t%d\t%d\t-\t-\t-\t%d\t%s\t\n", v.SKU, v.InitialStock,
				v.Available, v.Pending, v.Confirmed, v.LedgerTotal, verdict[v.OK])
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d sales, %d mismatched\n", len(rows), bad)
	// What the database's connections look like beside the sales: every
	// instance counted by its LISTEN connection.
	if c, err := postgres.ServerConnections(ctx, pool); err != nil {
		fmt.Fprintf(stderr, "check: connections: %v\n", err)
	} else {
		fmt.Fprintf(stdout, "connections: %d of %d in use (max_connections %d, %d reserved for superusers); flashline holds %d in %d instances\n",
			c.InUse, c.Available(), c.Max, c.Reserved, c.Flashline, c.Instances)
	}
	if bad > 0 {
		return errMismatch
	}
	return nil
}
