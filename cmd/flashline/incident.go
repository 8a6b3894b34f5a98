package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flashline/flashline/postgres"
)

const incidentUsage = `usage:
  flashline incident list [SALE_ID]   the latest incidents (of one sale)
  flashline incident show ID          an incident, the stock changes around its first
                                      bad one (who made them), and the reservations made since
`

// runIncident is `flashline incident`: what the invariant job recorded, and
// the audit of the stock (stock_audit) that says who made the change no
// ledger row records. It only reads.
func runIncident(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, incidentUsage)
		return fmt.Errorf("incident: a subcommand is required")
	}
	sub := args[0]
	e := newFlags("incident "+sub, getenv, stderr)
	e.FS.Usage = func() { fmt.Fprint(stderr, incidentUsage); e.FS.PrintDefaults() }
	var dbURL string
	e.databaseURL(&dbURL)
	if err := e.FS.Parse(args[1:]); err != nil {
		return err
	}
	var id int64
	switch sub {
	case "list":
		if e.FS.NArg() > 1 {
			return fmt.Errorf("incident list: give at most one SALE_ID")
		}
	case "show":
		if e.FS.NArg() != 1 {
			fmt.Fprint(stderr, incidentUsage)
			return fmt.Errorf("incident show: give exactly one incident ID")
		}
		var err error
		if id, err = strconv.ParseInt(e.FS.Arg(0), 10, 64); err != nil || id < 1 {
			return fmt.Errorf("incident show: %q is not an incident id (a positive number, see 'flashline incident list')", e.FS.Arg(0))
		}
	default:
		fmt.Fprint(stderr, incidentUsage)
		return fmt.Errorf("incident: unknown subcommand %q", sub)
	}
	pool, err := openAdmin(ctx, dbURL, getenv, stderr)
	if err != nil {
		return err
	}
	defer pool.Close()
	store := postgres.NewStore(postgres.SinglePool(pool), postgres.Options{})
	if sub == "list" {
		list, err := store.Incidents(ctx, e.FS.Arg(0))
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSALE\tKIND\tAT\tDETAIL")
		for _, i := range list {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", i.ID, i.SaleID, i.Kind, stamp(i.CreatedAt), i.Detail)
		}
		return tw.Flush()
	}
	rep, err := store.ReadIncident(ctx, id)
	if err != nil {
		return err
	}
	printIncident(stdout, rep)
	return nil
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000Z") }

func printIncident(w io.Writer, rep postgres.IncidentReport) {
	fmt.Fprintf(w, "Incident %d: %s, sale %s, recorded %s\n", rep.ID, rep.Kind, rep.SaleID, stamp(rep.CreatedAt))
	fmt.Fprintf(w, "  %s\n", rep.Detail)
	fmt.Fprintf(w, "  seen: initial %d, available %d, pending %d, confirmed %d, ledger %d\n\n",
		rep.InitialStock, rep.Available, rep.Pending, rep.Confirmed, rep.LedgerTotal)

	if rep.FirstBad == nil {
		fmt.Fprintln(w, "No change to the stock rows lacks a ledger row: the ledger or the reservations were")
		fmt.Fprintln(w, "changed instead (compare stock_ledger and reservations). The last stock changes before it:")
	} else {
		b := rep.FirstBad
		fmt.Fprintf(w, "First change with no ledger row: audit %d at %s, bucket %d, %s -> %s (%+d)\n",
			b.AuditID, stamp(b.ChangedAt), b.Bucket, qty(b.Old), qty(b.New), b.Delta())
		fmt.Fprintf(w, "  made by application_name %q, database user %q, backend pid %d, client %s, transaction %d\n",
			b.ApplicationName, b.DBUser, b.BackendPID, orDash(b.ClientAddr), b.XactID)
		fmt.Fprintf(w, "  statement (%s): %s\n", b.StatementTag, oneLine(b.Query))
		if n := len(rep.Unledgered); n > 1 {
			fmt.Fprintf(w, "  and %d more such change(s) before the incident:", n-1)
			for _, u := range rep.Unledgered[1:] {
				fmt.Fprintf(w, " audit %d (%+d)", u.FirstAuditID, u.AuditDelta-u.LedgerDelta)
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, "\nThe stock changes around it (! = no ledger row in its transaction):")
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\tAUDIT\tAT\tBUCKET\tOLD\tNEW\tDELTA\tAPPLICATION\tUSER\tPID\tXACT\tSTATEMENT")
	for _, c := range rep.Audit {
		mark := ""
		if c.Unledgered {
			mark = "!"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\t%+d\t%s\t%s\t%d\t%d\t%s\n", mark, c.AuditID, stamp(c.ChangedAt), c.Bucket,
			qty(c.Old), qty(c.New), c.Delta(), c.ApplicationName, c.DBUser, c.BackendPID, c.XactID, clip(oneLine(c.Query), 60))
	}
	_ = tw.Flush()
	if rep.FirstBad == nil {
		return
	}
	fmt.Fprintf(w, "\nReservations made since the first bad change: %d", rep.ReservationsTotal)
	if rep.ReservationsTotal > len(rep.Reservations) {
		fmt.Fprintf(w, " (the first %d shown)", len(rep.Reservations))
	}
	fmt.Fprintln(w)
	if len(rep.Reservations) == 0 {
		return
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RESERVATION\tCUSTOMER\tQUANTITY\tSTATE\tORDER\tAT")
	for _, r := range rep.Reservations {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", r.ReservationID, r.CustomerID, r.Quantity, r.State, orDash(r.OrderID), stamp(r.CreatedAt))
	}
	_ = tw.Flush()
}

func qty(q *int32) string {
	if q == nil {
		return "-"
	}
	return strconv.Itoa(int(*q))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func clip(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
