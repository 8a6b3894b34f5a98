package flashline_test

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
)

// TestLotteryAwards: the award rule of a lottery with variants, rank by
// rank: the variant named while a unit of it is left (none after, whatever
// is left of others); any takes the first variant, in the sale's order,
// with a unit left; once every unit is awarded, nobody wins.
func TestLotteryAwards(t *testing.T) {
	variants := []flashline.LotteryVariant{{SKU: "S", Units: 1}, {SKU: "M", Units: 2}, {SKU: "L", Units: 1}}
	choices := []string{"M", "", "S", "S", "", "M", "L", "", ""}
	want := []string{"M", "S", "", "", "M", "", "L", "", ""}
	require.Equal(t, want, flashline.LotteryAwards(choices, variants))
	require.Equal(t, []string{"", ""}, flashline.LotteryAwards([]string{"XL", ""}, nil))

	// The choice is committed: another choice is another leaf, "any" the
	// v2 leaf.
	r := flashline.RegistrantOf("sale_1", "cust_1")
	require.NotEqual(t, flashline.RegistrantChoiceLeaf(r, "S"), flashline.RegistrantChoiceLeaf(r, "M"))
	require.Equal(t, flashline.RegistrantLeaf(r), flashline.RegistrantChoiceLeaf(r, ""))

	for named, want := range map[string]string{"": "", "any": "", "M": "M"} {
		got, err := flashline.VariantChoice(named, variants)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	_, err := flashline.VariantChoice("XL", variants)
	require.Error(t, err)
	_, err = flashline.VariantChoice("S", nil)
	require.Error(t, err, "a lottery without variants takes no variant")
	got, err := flashline.VariantChoice("", nil)
	require.NoError(t, err)
	require.Empty(t, got)
}

// TestAuditLotteryRecords: the database form of verify-draw, on records as
// the draw and the waitlist write them (a lottery without variants and one
// with): faithful records agree; an award moved, a rank changed or a unit
// passed down with no window expired are named.
func TestAuditLotteryRecords(t *testing.T) {
	const sale = "sale_01M997HPX6FG05114Y4357H8XX"
	drawn := time.Now()
	for _, variants := range [][]flashline.LotteryVariant{nil, {{SKU: "S", Units: 1}, {SKU: "L", Units: 2}}} {
		l := flashline.Lottery{SaleID: sale, InitialStock: 3, DrawSeed: []byte("seed"), DrawnAt: &drawn, DrawVersion: 2,
			Rules: flashline.LotteryRules{Waitlist: true}, RegistrantsRoot: []byte{1}, Variants: variants}
		if variants != nil {
			l.DrawVersion = flashline.DrawVersionVariants
		}
		choices := []string{"L", "", "S", "S", "", "L"}
		var entries []flashline.LotteryEntry
		for i := range 6 {
			e := flashline.LotteryEntry{CustomerID: fmt.Sprint("cust_", i), Rank: i + 1, State: flashline.RegistrationWaitlisted}
			if variants != nil {
				e.Choice = choices[i]
			}
			entries = append(entries, e)
		}
		tr := flashline.NewDrawTranscript(l, entries)
		for i, r := range tr.Ranked {
			for j := range entries {
				if flashline.RegistrantOf(sale, entries[j].CustomerID) == r && slices.Contains(tr.Winners, r) {
					entries[j].State = flashline.RegistrationWon
					if variants != nil {
						entries[j].WonVariant = tr.Awards[i]
					}
				}
			}
		}
		require.Empty(t, flashline.AuditLotteryRecords(tr, sale, entries), "variants %v", variants)

		moved := slices.Clone(entries)
		moved[0].Rank = 6
		require.NotEmpty(t, flashline.AuditLotteryRecords(tr, sale, moved))
		// A unit passed down with no window expired.
		promoted := slices.Clone(entries)
		for j := range promoted {
			if promoted[j].State == flashline.RegistrationWaitlisted {
				promoted[j].State = flashline.RegistrationWon
				if variants != nil {
					promoted[j].WonVariant = cmp.Or(promoted[j].Choice, "S")
				}
				break
			}
		}
		require.NotEmpty(t, flashline.AuditLotteryRecords(tr, sale, promoted))
		if variants != nil {
			swapped := slices.Clone(entries)
			for j := range swapped {
				if swapped[j].WonVariant == "S" {
					swapped[j].WonVariant = "L"
					break
				}
			}
			require.NotEmpty(t, flashline.AuditLotteryRecords(tr, sale, swapped))
		}
	}
}

// TestVariantTranscriptWithBeacon: a lottery with variants drawn with a
// beacon round verifies step by step, one's own inclusion too; the
// registrants' root is formula v3's, which commits the choices.
func TestVariantTranscriptWithBeacon(t *testing.T) {
	const sale = "sale_01M997HPX6FG05114Y4357H8XX"
	signer, err := flashline.NewBeaconSigner([]byte("lottery variants' test beacon key material"))
	require.NoError(t, err)
	closes := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	chain := flashline.BeaconChain{PublicKey: signer.PublicKey(), Genesis: closes.Add(-time.Hour), Period: 3 * time.Second}
	round := signer.Round(chain.RoundAfter(closes))
	seed := []byte("0123456789abcdef")
	variants := []flashline.LotteryVariant{{SKU: "S", Units: 1}, {SKU: "L", Units: 2}}
	named := map[string]string{}
	var rs []flashline.Registrant
	var choices []string
	by := map[flashline.Registrant]string{}
	for i := range 9 {
		c := fmt.Sprint("cust_", i)
		named[c] = []string{"S", "L", ""}[i%3]
		r := flashline.RegistrantOf(sale, c)
		rs, choices, by[r] = append(rs, r), append(choices, named[c]), c
	}
	root := flashline.RegistrantsChoicesRoot(rs, choices)
	require.NotEqual(t, flashline.RegistrantsRoot(rs), root)
	order := flashline.LotteryRanking(flashline.LotteryFinalSeedV3(sale, root, round.Randomness, seed), rs)
	var entries []flashline.LotteryEntry
	for i, r := range order {
		entries = append(entries, flashline.LotteryEntry{CustomerID: by[r], Rank: i + 1, Choice: named[by[r]]})
	}
	drawn := closes.Add(time.Minute)
	l := flashline.Lottery{SaleID: sale, InitialStock: 3, DrawSeed: seed, DrawnAt: &drawn, DrawVersion: flashline.DrawVersionVariants,
		Rules: flashline.LotteryRules{RegistrationClosesAt: closes, DrawAt: closes}, Variants: variants,
		RegistrantsRoot: root[:], RegistrantsCount: len(rs), Beacon: &flashline.BeaconRecord{Chain: chain, BeaconRound: round}}
	tr := flashline.NewDrawTranscript(l, entries)
	me := flashline.RegistrantOf(sale, "cust_4")
	steps := flashline.VerifyDrawTranscript(tr, flashline.DrawPins{Root: root[:], BeaconPublicKey: signer.PublicKey(), Registrant: &me})
	var names []string
	for _, s := range steps {
		require.True(t, s.OK, "%s: %s", s.Name, s.Detail)
		names = append(names, s.Name)
	}
	require.Equal(t, []string{"commitment", "registrants", "inclusion", "beacon", "ranks", "outcome"}, names)
	require.Len(t, tr.Winners, 3)
	require.Contains(t, steps[len(steps)-1].Detail, "S 1 of 1, L 2 of 2")
}
