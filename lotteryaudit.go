package flashline

import "fmt"

// AuditLotteryRecords checks what the database records of a drawn lottery
// (entries: every registration with its state, rank, choice and the variant
// it holds) against its transcript t, which VerifyDrawTranscript checked
// from itself: every registration is drawn at the rank t gives its
// registrant, with the variant it named (formula v3); one that the draw
// awarded a unit (t's winners: ranks 1 to units, or with variants each
// award) is won or expired, holding that variant; one awarded nothing is
// waitlisted or lost as t's waitlist says, or, with a waitlist, won or
// expired with a unit passed down, of the variant it named or any, and
// never more units passed down (of a variant) than windows expired. Each
// problem is named; none: the records agree with the draw.
func AuditLotteryRecords(t DrawTranscript, saleID string, entries []LotteryEntry) []string {
	type drawn struct {
		rank         int
		choice, gets string
		won          bool
	}
	v3 := t.Version == DrawVersionVariants
	byRegistrant := make(map[Registrant]drawn, len(t.Ranked))
	for i, r := range t.Ranked {
		d := drawn{rank: t.Ranks[i], won: t.Ranks[i] <= t.Units}
		if v3 {
			d.choice, d.gets, d.won = t.Choices[i], t.Awards[i], t.Awards[i] != ""
		}
		byRegistrant[r] = d
	}
	var problems []string
	bad := func(e LotteryEntry, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s (rank %d): ", e.CustomerID, e.Rank)+fmt.Sprintf(format, args...))
	}
	if len(entries) != len(t.Ranked) {
		problems = append(problems, fmt.Sprintf("the database has %d registrations, the transcript %d registrants", len(entries), len(t.Ranked)))
	}
	expired, promoted := map[string]int{}, map[string]int{}
	for _, e := range entries {
		d, ok := byRegistrant[RegistrantOf(saleID, e.CustomerID)]
		holds := e.State == RegistrationWon || e.State == RegistrationExpired
		switch {
		case !ok:
			bad(e, "not among the transcript's registrants")
		case e.Rank != d.rank:
			bad(e, "recorded rank %d, the transcript's %d", e.Rank, d.rank)
		case v3 && e.Choice != d.choice:
			bad(e, "names %s, the transcript %s", choiceName(e.Choice), choiceName(d.choice))
		case d.won && (!holds || e.WonVariant != d.gets):
			what := "a unit"
			if v3 {
				what = "variant " + d.gets
			}
			bad(e, "awarded %s by the draw, recorded %s %q", what, e.State, e.WonVariant)
		case !d.won && holds && !t.Waitlist:
			bad(e, "awarded nothing by the draw, recorded %s with no waitlist", e.State)
		case !d.won && holds && v3 && (e.WonVariant == "" || (d.choice != "" && e.WonVariant != d.choice)):
			bad(e, "promoted to variant %q, but named %s", e.WonVariant, choiceName(d.choice))
		case !d.won && !holds && e.WonVariant != "":
			bad(e, "%s but holds variant %s", e.State, e.WonVariant)
		case !d.won && !holds && t.Waitlist && e.State != RegistrationWaitlisted:
			bad(e, "awarded nothing by the draw, recorded %s in a lottery with a waitlist", e.State)
		case !d.won && !holds && !t.Waitlist && e.State != RegistrationLost:
			bad(e, "awarded nothing by the draw, recorded %s", e.State)
		}
		if ok && e.State == RegistrationExpired {
			expired[e.WonVariant]++
		}
		if ok && !d.won && holds {
			promoted[e.WonVariant]++
		}
	}
	for v, n := range promoted {
		if n > expired[v] {
			of := "the sale"
			if v != "" {
				of = "variant " + v
			}
			problems = append(problems, fmt.Sprintf("%d unit(s) of %s passed down, only %d window(s) expired", n, of, expired[v]))
		}
	}
	return problems
}
