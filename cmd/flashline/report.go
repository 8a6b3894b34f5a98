package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
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
	if q := r.Queue; q != nil {
		secs := func(p50, p90, p99 *float64) string {
			if p50 == nil {
				return "-"
			}
			return fmt.Sprintf("%.1f / %.1f / %.1f s", *p50, *p90, *p99)
		}
		f = append(f, [2]string{"arrivals", fmt.Sprintf("%d (peak %d a minute)", q.Arrivals, q.PeakArrivalsPerMinute)},
			[2]string{"time in line p50/p90/p99", secs(q.WaitP50, q.WaitP90, q.WaitP99)},
			[2]string{"admission to reservation p50/p90/p99", secs(q.ToReserveP50, q.ToReserveP90, q.ToReserveP99)},
			[2]string{"admitted", fmt.Sprintf("%d (%d reserved, %d did not)", q.Admitted, q.Reserved, q.AdmittedNotReserved)},
			[2]string{"left the line", strconv.FormatInt(q.Left, 10)},
			[2]string{"queued / active", fmt.Sprintf("%d / %d", q.Queued, q.Active)},
			[2]string{"instances counted", strconv.Itoa(q.Instances)})
	}
	return f
}

func printReport(w io.Writer, r api.Report) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, f := range reportFigures(r) {
		fmt.Fprintf(tw, "%s\t%s\n", f[0], f[1])
	}
	if vs := variantRows(r.Sale); vs != nil {
		fmt.Fprintln(tw, "\nVARIANT\tTITLE\tINITIAL\tSOLD\tHELD\tAVAILABLE")
		for _, v := range vs {
			fmt.Fprintln(tw, strings.Join(v, "\t"))
		}
	}
	fmt.Fprintln(tw, "\nWHEN\tWHAT\tWHO\tNOTE")
	for _, m := range r.Timeline {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.At, m.Event, m.By, m.Note)
	}
	_ = tw.Flush()
}

// variantRows are a sale's variants as the report shows them: sold is
// confirmed, held pending (nil for a sale without variants).
func variantRows(s api.Sale) [][]string {
	var rows [][]string
	for _, v := range s.Variants {
		rows = append(rows, []string{v.SKU, v.Title, strconv.Itoa(v.InitialStock), strconv.Itoa(v.Confirmed),
			strconv.Itoa(v.Pending), strconv.Itoa(v.Available)})
	}
	return rows
}

// writeReportCSV writes the figures as (figure,value) rows, a blank row,
// then the timeline as at,event,by,note, for a waiting room a blank row
// and the arrivals of each minute as minute,arrivals, and for a sale with
// variants a blank row and variant,title,initial,sold,held,available.
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
	if r.Queue != nil {
		_ = cw.Write(nil)
		_ = cw.Write([]string{"minute", "arrivals"})
		for _, m := range r.Queue.ArrivalsByMinute {
			_ = cw.Write([]string{m.Minute, strconv.FormatInt(m.Count, 10)})
		}
	}
	if vs := variantRows(r.Sale); vs != nil {
		_ = cw.Write(nil)
		_ = cw.Write([]string{"variant", "title", "initial", "sold", "held", "available"})
		for _, v := range vs {
			_ = cw.Write(v)
		}
	}
	cw.Flush()
	return cw.Error()
}
