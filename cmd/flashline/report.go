package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/flashline/flashline/api"
)

// The report after a sale (`flashline sale report`), from the same view the
// console's report page renders (handlers.NewReportView).

// reportFigures are the report's figures, in the order both forms print
// them.
func reportFigures(r api.Report) [][2]string {
	s := r.Sale
	opt := func(p *string) string {
		if p == nil {
			return "-"
		}
		return *p
	}
	toSellOut := "-"
	if r.SecondsToSellOut != nil {
		toSellOut = strconv.FormatFloat(*r.SecondsToSellOut, 'f', 1, 64) + " s"
	}
	f := [][2]string{
		{"sale", s.SaleID}, {"title", s.Title}, {"state", s.State}, {"as of", r.At},
		{"initial stock", strconv.Itoa(s.InitialStock)},
		{"confirmed", strconv.Itoa(s.Confirmed)}, {"pending", strconv.Itoa(s.Pending)},
		{"expired", strconv.Itoa(s.Expired)}, {"cancelled", strconv.Itoa(s.Cancelled)},
		{"voided", fmt.Sprintf("%d (%d orders)", s.Voided, r.VoidedOrders)},
		{"available", strconv.Itoa(s.Available)},
		{"opened", opt(r.OpenedAt)}, {"sold out", opt(r.SoldOutAt)}, {"time to sell out", toSellOut},
		{"reservations", fmt.Sprintf("%d by %d customers", r.Reservations, r.Customers)},
		{"first reservation", opt(r.FirstReservation)}, {"last reservation", opt(r.LastReservation)},
		{"late payments", fmt.Sprintf("%d (%d refunded)", r.LatePayments, r.LateRefunded)},
	}
	if c := r.Room; c != nil {
		f = append(f, [2]string{"crowd before the open", strconv.FormatInt(c.Preopen, 10)},
			[2]string{"places handed out", strconv.FormatInt(c.Positions, 10)},
			[2]string{"admitted through", strconv.FormatInt(c.AdmittedThrough, 10)})
	}
	return f
}

func printReport(w io.Writer, r api.Report) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, f := range reportFigures(r) {
		fmt.Fprintf(tw, "%s\t%s\n", f[0], f[1])
	}
	fmt.Fprintln(tw, "\nWHEN\tWHAT\tWHO\tNOTE")
	for _, m := range r.Timeline {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.At, m.Event, m.By, m.Note)
	}
	_ = tw.Flush()
}

// writeReportCSV writes the figures as (figure,value) rows, a blank row,
// then the timeline as at,event,by,note.
func writeReportCSV(w io.Writer, r api.Report) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"figure", "value"})
	for _, f := range reportFigures(r) {
		_ = cw.Write([]string{f[0], f[1]})
	}
	_ = cw.Write(nil)
	_ = cw.Write([]string{"at", "event", "by", "note"})
	for _, m := range r.Timeline {
		_ = cw.Write([]string{m.At, m.Event, m.By, m.Note})
	}
	cw.Flush()
	return cw.Error()
}
