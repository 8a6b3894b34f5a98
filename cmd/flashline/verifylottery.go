package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/postgres"
)

// verifyLotteryDraw is `flashline sale verify-draw` for a lottery sale, once
// the seed checks against its commitment: every registration's recorded
// rank and outcome against the order recomputed from the seed
// (flashline.AuditLottery).
func verifyLotteryDraw(ctx context.Context, store *postgres.Store, saleID string, seed []byte, stdout io.Writer) error {
	l, err := store.Lottery(ctx, saleID)
	if err != nil {
		return fmt.Errorf("sale verify-draw: %w", err)
	}
	if l.DrawnAt == nil {
		fmt.Fprintln(stdout, "The draw has not been made yet. Ask again after it.")
		return nil
	}
	regs, err := store.LotteryRegistrations(ctx, saleID)
	if err != nil {
		return fmt.Errorf("sale verify-draw: %w", err)
	}
	entries := make([]flashline.LotteryEntry, len(regs))
	for i, r := range regs {
		entries[i] = flashline.LotteryEntry{CustomerID: r.CustomerID, State: r.State, Rank: r.DrawRank}
	}
	audit := flashline.AuditLottery(seed, saleID, l.InitialStock, l.Rules.Waitlist, entries)
	fmt.Fprintf(stdout, "lottery: %d registration(s), %d unit(s), waitlist %t, drawn at %s; %d window(s) expired, %d promoted\n\n",
		len(entries), l.InitialStock, l.Rules.Waitlist, l.DrawnAt.UTC().Format("2006-01-02T15:04:05.000Z"), audit.Expired, audit.Promoted)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RANK\tCUSTOMER\tDRAW\tSTATE\tCHECK")
	for _, c := range audit.Checks {
		check := "ok"
		if c.Problem != "" {
			check = "MISMATCH: " + c.Problem
		}
		fmt.Fprintf(tw, "%d\t%s\t%016x\t%s\t%s\n", c.DrawnRank, c.CustomerID, c.Draw, c.State, check)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if n := audit.Problems(); n > 0 {
		fmt.Fprintf(stdout, "\n%d registration(s) disagree with the draw.\n", n)
		return errDrawMismatch
	}
	fmt.Fprintln(stdout, "\nThe draw checks out.")
	return nil
}
