package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/api"
	"github.com/flashline/flashline/postgres"
)

const verifyDrawUsage = `usage: flashline sale verify-draw SALE_ID [--url URL] [--root HEX] [--commitment HEX]
                             [--beacon-public-key HEX] [--customer ID] [--database-url URL]
  A lottery sale: fetch its draw's transcript (GET URL/sales/SALE_ID/draw) and
  check it from that document alone, no database and no token: the seed
  against its commitment, the registrants against their Merkle root, the
  beacon round (the first after the close, signed by the beacon's key), every
  rank recomputed, the winners and the waitlist; each step is named with its
  result. --root, --commitment and --beacon-public-key hold the transcript to
  what you saw published earlier (the root at the close, the commitment at
  creation, the beacon's own key); --customer checks that your registration
  is in the committed set and shows your rank.
  With --database-url, a drawn lottery's records are then checked against
  the transcript: every registration at its rank, each winner of the draw
  holding what it was awarded (with variants, the variant), the others
  waitlisted or lost, or promoted down the waitlist (a unit of the variant
  they named, or any, never more than windows expired).
  A lottery with variants (formula v3) is checked the same way, each
  registrant's choice in the root and each award recomputed in rank order.
  A randomized_at_open waiting room publishes its pre-open crowd, committed at
  the open, in the same transcript: it is checked the same way (--customer
  checks that you are among the holders and shows your rank), and then, with
  --database-url, its admissions as below.
  A waiting-room sale: fetch its policy (GET URL/sales/SALE_ID/policy), check
  that the revealed seed is the one committed to before the open, recompute
  every admitted customer's draw and check it against the admissions the
  database records (--database-url). Exit 1 when anything does not match.
`

// errDrawMismatch makes `flashline sale verify-draw` exit 1 after printing
// what did not match.
var errDrawMismatch = errors.New("verify-draw: the draw does not check out")

// runVerifyDraw is `flashline sale verify-draw SALE_ID`.
func runVerifyDraw(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	e := newFlags("sale verify-draw", getenv, stderr)
	e.FS.Usage = func() { fmt.Fprint(stderr, verifyDrawUsage); e.FS.PrintDefaults() }
	var dbURL, base string
	var pins lotteryPins
	e.databaseURL(&dbURL)
	e.String(&base, "url", "FLASHLINE_URL", "http://127.0.0.1:8080", "the service whose published policy is checked")
	e.FS.StringVar(&pins.root, "root", "", "a lottery: the registrants' root you saw published at the close (hex)")
	e.FS.StringVar(&pins.commitment, "commitment", "", "a lottery: the seed's commitment you saw published at creation (hex)")
	e.FS.StringVar(&pins.beaconKey, "beacon-public-key", "", "a lottery: the beacon's public key, from the beacon itself (hex)")
	e.FS.StringVar(&pins.customer, "customer", "", "a lottery: your customer id: check that your registration was committed, and show your rank")
	// The sale id may come before the flags.
	var saleID string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		saleID, args = args[0], args[1:]
	}
	if err := e.FS.Parse(args); err != nil {
		return err
	}
	if saleID == "" && e.FS.NArg() == 1 {
		saleID = e.FS.Arg(0)
	} else if e.FS.NArg() != 0 || saleID == "" {
		fmt.Fprint(stderr, verifyDrawUsage)
		return errors.New("sale verify-draw: give exactly one SALE_ID")
	}
	if !flashline.ValidID(flashline.SaleIDPrefix, saleID) {
		return fmt.Errorf("sale verify-draw: sale %q not found (a sale id is sale_ and 26 characters)", saleID)
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("sale verify-draw: --url must be an http(s) URL, e.g. http://127.0.0.1:8080")
	}

	doc, err := fetchTranscript(ctx, strings.TrimRight(base, "/")+"/sales/"+saleID+"/draw")
	switch {
	case err == nil && doc.Formula != api.CrowdFormula:
		// A lottery: its transcript checked alone, then, with a database,
		// what the database records of each registration against it.
		if err := verifyLotteryDraw(doc, pins, stdout); err != nil || dbURL == "" || doc.Status != "drawn" {
			return err
		}
		return auditLotteryRecords(ctx, doc, dbURL, getenv, stdout, stderr)
	case err == nil:
		// A randomized_at_open room: its committed crowd checked from the
		// transcript alone, then, with a database, its admissions.
		if err := verifyLotteryDraw(doc, pins, stdout); err != nil || dbURL == "" {
			return err
		}
		fmt.Fprintln(stdout)
	case !errors.Is(err, errNotALottery):
		return fmt.Errorf("sale verify-draw: %w", err)
	}
	policy, err := fetchPolicy(ctx, strings.TrimRight(base, "/")+"/sales/"+saleID+"/policy")
	if err != nil {
		return fmt.Errorf("sale verify-draw: %w", err)
	}
	fmt.Fprintf(stdout, "Sale %s (%s)\ncommitment  %s\n", saleID, policy.Policy, policy.DrawCommitment)
	if policy.DrawSeed == "" {
		fmt.Fprintln(stdout, "seed        not revealed yet: the sale has not opened. Ask again after the open.")
		return nil
	}
	seed, err := flashline.VerifyDrawSeed(policy.DrawCommitment, policy.DrawSeed)
	if err != nil {
		fmt.Fprintf(stdout, "seed        %s\nMISMATCH: %v\n", policy.DrawSeed, err)
		return errDrawMismatch
	}
	fmt.Fprintf(stdout, "seed        %s  (SHA-256 matches the commitment)\n", policy.DrawSeed)

	pool, err := openAdmin(ctx, dbURL, getenv, stderr)
	if err != nil {
		return err
	}
	defer pool.Close()
	rec, err := postgres.NewStore(postgres.SinglePool(pool), postgres.Options{}).DrawRecord(ctx, saleID)
	if err != nil {
		return fmt.Errorf("sale verify-draw: %w", err)
	}
	audit := flashline.AuditDraw(seed, rec)
	preopen := "not fixed yet"
	if rec.PreopenCount >= 0 {
		preopen = fmt.Sprint(rec.PreopenCount)
	}
	fmt.Fprintf(stdout, "joined before the open %s, watermark %d, %d admitted customer(s) reserved\n\n", preopen, rec.AdmittedThrough, len(rec.Admitted))
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RESERVED\tCUSTOMER\tDRAW\tRANK\tCHECK")
	for _, c := range audit.Checks {
		check := "ok"
		if c.Problem != "" {
			check = "OUT OF ORDER: " + c.Problem
		}
		rank := "-"
		if c.Rank > 0 {
			rank = fmt.Sprint(c.Rank)
		}
		fmt.Fprintf(tw, "%s\t%s\t%016x\t%s\t%s\n", c.ReservedAt.UTC().Format(time.RFC3339Nano), c.CustomerID, c.Draw, rank, check)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\n%s.\n", audit.Note)
	if n := audit.Problems(); n > 0 {
		fmt.Fprintf(stdout, "%d admission(s) out of the draw's order.\n", n)
		return errDrawMismatch
	}
	fmt.Fprintln(stdout, "The draw checks out.")
	return nil
}

// fetchPolicy reads a sale's published policy.
func fetchPolicy(ctx context.Context, u string) (api.Policy, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return api.Policy{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return api.Policy{}, fmt.Errorf("fetch the policy: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return api.Policy{}, fmt.Errorf("fetch the policy: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return api.Policy{}, fmt.Errorf("fetch the policy: GET %s: %s: %s", u, resp.Status, strings.TrimSpace(string(body)))
	}
	var p api.Policy
	if err := json.Unmarshal(body, &p); err != nil {
		return api.Policy{}, fmt.Errorf("fetch the policy: %w", err)
	}
	if p.DrawCommitment == "" {
		return api.Policy{}, fmt.Errorf("fetch the policy: GET %s publishes no draw commitment", u)
	}
	return p, nil
}
