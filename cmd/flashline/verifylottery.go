package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/api"
	"github.com/flashline/flashline/postgres"
)

// lotteryPins are what the verifier holds a lottery's transcript to, from
// verify-draw's flags: what was seen published earlier, and one's own
// customer id.
type lotteryPins struct {
	commitment, root, beaconKey, customer string
}

// errNotALottery: the sale has no draw transcript (not a lottery).
var errNotALottery = errors.New("not a lottery")

// fetchTranscript reads a lottery's draw transcript (errNotALottery: the
// sale is not a lottery).
func fetchTranscript(ctx context.Context, u string) (api.DrawTranscript, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return api.DrawTranscript{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return api.DrawTranscript{}, fmt.Errorf("fetch the draw's transcript: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return api.DrawTranscript{}, fmt.Errorf("fetch the draw's transcript: %w", err)
	}
	if resp.StatusCode == http.StatusConflict && strings.Contains(string(body), `"no_lottery"`) {
		return api.DrawTranscript{}, errNotALottery
	}
	if resp.StatusCode != http.StatusOK {
		return api.DrawTranscript{}, fmt.Errorf("fetch the draw's transcript: GET %s: %s: %s", u, resp.Status, strings.TrimSpace(string(body)))
	}
	var t api.DrawTranscript
	if err := json.Unmarshal(body, &t); err != nil {
		return api.DrawTranscript{}, fmt.Errorf("fetch the draw's transcript: %w", err)
	}
	return t, nil
}

// verifyLotteryDraw is `flashline sale verify-draw` for a lottery sale: the
// transcript (GET /sales/{id}/draw) checked from itself alone, no database
// and no token, step by step (flashline.VerifyDrawTranscript), each step
// named with its result.
func verifyLotteryDraw(doc api.DrawTranscript, pins lotteryPins, stdout io.Writer) error {
	kind := "lottery"
	if doc.Formula == api.CrowdFormula {
		kind = "waiting room's pre-open crowd"
	}
	fmt.Fprintf(stdout, "Sale %s (%s, %s): %s\n", doc.SaleID, kind, doc.Formula, doc.Status)
	if doc.Status != "drawn" {
		fmt.Fprintf(stdout, "commitment  %s\n", doc.Commitment)
		if doc.RegistrantsRoot != nil {
			fmt.Fprintf(stdout, "root        %s (%d registrants, committed at the close: keep it to check the draw with --root)\n", *doc.RegistrantsRoot, doc.RegistrantCount)
		}
		fmt.Fprintln(stdout, "The draw has not been made yet. Ask again after it.")
		return nil
	}
	t, err := doc.Domain()
	if err != nil {
		fmt.Fprintf(stdout, "MISMATCH at the document: %v\n", err)
		return errDrawMismatch
	}
	var p flashline.DrawPins
	hexPin := func(name, s string) ([]byte, error) {
		if s == "" {
			return nil, nil
		}
		b, err := hex.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("sale verify-draw: --%s must be hex", name)
		}
		return b, nil
	}
	if p.Commitment, err = hexPin("commitment", pins.commitment); err != nil {
		return err
	}
	if p.Root, err = hexPin("root", pins.root); err != nil {
		return err
	}
	if p.BeaconPublicKey, err = hexPin("beacon-public-key", pins.beaconKey); err != nil {
		return err
	}
	if pins.customer != "" {
		r := flashline.RegistrantOf(doc.SaleID, pins.customer)
		p.Registrant = &r
		fmt.Fprintf(stdout, "you         %s is registrant %s\n", pins.customer, r)
	}
	steps := flashline.VerifyDrawTranscript(t, p)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tCHECK\tDETAIL")
	failed := ""
	for _, s := range steps {
		check := "ok"
		if !s.OK {
			check = "MISMATCH"
			if failed == "" {
				failed = s.Name
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, check, s.Detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if pins.customer != "" {
		for i, r := range t.Ranked {
			if p.Registrant != nil && r == *p.Registrant {
				fmt.Fprintf(stdout, "your rank   %d of %d\n", t.Ranks[i], len(t.Ranked))
			}
		}
	}
	if failed != "" {
		fmt.Fprintf(stdout, "\nThe draw does not check out: the %q step fails.\n", failed)
		return errDrawMismatch
	}
	if t.Beacon == nil {
		fmt.Fprintln(stdout, "\nThe draw checks out, but this deployment has no beacon: the store could know the order before registration closed.")
		return nil
	}
	fmt.Fprintln(stdout, "\nThe draw checks out.")
	return nil
}

// auditLotteryRecords is verify-draw's database form for a lottery: what
// the database records of each registration (rank, choice, state, the
// variant held) checked against the transcript doc, already verified
// (flashline.AuditLotteryRecords).
func auditLotteryRecords(ctx context.Context, doc api.DrawTranscript, dbURL string, getenv func(string) string, stdout, stderr io.Writer) error {
	t, err := doc.Domain()
	if err != nil {
		return err
	}
	pool, err := openAdmin(ctx, dbURL, getenv, stderr)
	if err != nil {
		return err
	}
	defer pool.Close()
	entries, err := postgres.NewStore(postgres.SinglePool(pool), postgres.Options{}).LotteryEntries(ctx, doc.SaleID)
	if err != nil {
		return fmt.Errorf("sale verify-draw: %w", err)
	}
	problems := flashline.AuditLotteryRecords(t, doc.SaleID, entries)
	fmt.Fprintf(stdout, "\ndatabase    %d registration(s) checked against the transcript\n", len(entries))
	for _, p := range problems {
		fmt.Fprintf(stdout, "MISMATCH    %s\n", p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(stdout, "\n%d record(s) disagree with the draw.\n", len(problems))
		return errDrawMismatch
	}
	fmt.Fprintln(stdout, "The records agree with the draw.")
	return nil
}
