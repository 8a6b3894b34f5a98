package flashline

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
)

// A lottery with variants (issue 49): each registration names the variant it
// wants, or any; the draw ranks the registrants as formula v2 does and then
// awards, rank by rank, one unit of a variant to each registrant while the
// variants last. Its formula, v3, differs from v2 in three places only
// (docs/lottery.md):
//
//	choice      c: the variant's SKU (its UTF-8 bytes), or nothing for any
//	leaf        H(0x00 ‖ r ‖ c): the root commits every registrant's choice
//	final seed  F = H("flashline/lottery/draw/v3" ‖ 0x00 ‖ sale ‖ 0x00 ‖ root ‖ beacon ‖ seed)
//	award       ranks in order: a registrant who named a variant wins a unit
//	            of it if one is left; one who named any wins a unit of the
//	            first variant, in the sale's order, with a unit left; anyone
//	            else wins nothing (waitlisted, or lost)
//
// A lottery without variants draws with v2, unchanged.

// DrawVersionVariants is the draw_version of a lottery with variants.
const DrawVersionVariants = 3

// AnyVariant is what a registration names to take any variant.
const AnyVariant = "any"

const lotteryDrawTagV3 = "flashline/lottery/draw/v3"

// LotteryVariant is one variant of a lottery sale as its draw sees it: its
// SKU and its units, in the sale's order.
type LotteryVariant struct {
	SKU   string
	Units int
	// Title is what shoppers see (not part of the draw).
	Title string
}

// RegistrantChoiceLeaf is r's leaf in a lottery with variants: it commits
// r's choice (a SKU, "" for any) with r.
func RegistrantChoiceLeaf(r Registrant, choice string) [32]byte {
	b := make([]byte, 0, 1+len(r)+len(choice))
	b = append(append(append(b, 0), r[:]...), choice...)
	return sha256.Sum256(b)
}

// sortChosen sorts rs ascending with their choices (choices[i] is rs[i]'s),
// on copies.
func sortChosen(rs []Registrant, choices []string) ([]Registrant, []string) {
	idx := make([]int, len(rs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return bytes.Compare(rs[a][:], rs[b][:]) })
	sr, sc := make([]Registrant, len(rs)), make([]string, len(rs))
	for i, j := range idx {
		sr[i], sc[i] = rs[j], choices[j]
	}
	return sr, sc
}

// RegistrantsChoicesRoot is the Merkle root of a lottery with variants:
// the leaves RegistrantChoiceLeaf(r, choice) in ascending order of r
// (choices[i] is rs[i]'s; any order).
func RegistrantsChoicesRoot(rs []Registrant, choices []string) [32]byte {
	sr, sc := sortChosen(rs, choices)
	level := make([][32]byte, len(sr))
	for i := range sr {
		level[i] = RegistrantChoiceLeaf(sr[i], sc[i])
	}
	return merkleRoot(level)
}

// LotteryFinalSeedV3 is F of a lottery with variants.
func LotteryFinalSeedV3(saleID string, root [32]byte, beaconRandomness, seed []byte) [32]byte {
	return lotteryFinalSeed(lotteryDrawTagV3, saleID, root, beaconRandomness, seed)
}

// LotteryAwards awards the units of variants to choices in rank order
// (choices[i] is rank i+1's: a SKU, "" for any): the variant each wins,
// "" for none.
func LotteryAwards(choices []string, variants []LotteryVariant) []string {
	left := make(map[string]int, len(variants))
	total := 0
	for _, v := range variants {
		left[v.SKU] += v.Units
		total += v.Units
	}
	awards := make([]string, len(choices))
	for i, c := range choices {
		if total == 0 {
			break
		}
		if c == "" {
			for _, v := range variants {
				if left[v.SKU] > 0 {
					c = v.SKU
					break
				}
			}
		}
		if left[c] > 0 {
			awards[i] = c
			left[c]--
			total--
		}
	}
	return awards
}

// VariantChoice reads what a registration names: "" for any (named "any"
// or nothing), else one of variants' SKUs (an error names what is wrong).
func VariantChoice(named string, variants []LotteryVariant) (string, error) {
	if len(variants) == 0 {
		if named != "" {
			return "", Invalid("this lottery has no variants: leave out \"variant\"")
		}
		return "", nil
	}
	if named == "" || named == AnyVariant {
		return "", nil
	}
	for _, v := range variants {
		if v.SKU == named {
			return named, nil
		}
	}
	return "", Invalid("this sale has no variant " + named + ": name one of its variants' SKUs, or \"any\"")
}

// checkVariantsTranscript checks what a transcript of formula v3 says of
// its variants and choices: one choice per registrant, each a listed
// variant or any, the units adding up.
func checkVariantsTranscript(t DrawTranscript) error {
	if len(t.Variants) == 0 {
		return fmt.Errorf("formula v3 lists no variants")
	}
	if len(t.Choices) != len(t.Ranked) {
		return fmt.Errorf("%d choices for %d registrants", len(t.Choices), len(t.Ranked))
	}
	units := 0
	known := make(map[string]bool, len(t.Variants))
	for _, v := range t.Variants {
		if known[v.SKU] {
			return fmt.Errorf("variant %s is listed twice", v.SKU)
		}
		known[v.SKU] = true
		units += v.Units
	}
	if units != t.Units {
		return fmt.Errorf("the variants' units add up to %d, the transcript has %d units", units, t.Units)
	}
	for i, c := range t.Choices {
		if c != "" && !known[c] {
			return fmt.Errorf("registrant %s names variant %s, which the sale does not list", t.Ranked[i], c)
		}
	}
	return nil
}

// variantOutcome checks the winners, the waitlist and each registrant's
// award of a transcript of formula v3 against the awards recomputed in the
// order ranking, and describes them.
func variantOutcome(t DrawTranscript, ranking []Registrant) (string, error) {
	choiceOf := make(map[Registrant]string, len(t.Ranked))
	for i, r := range t.Ranked {
		choiceOf[r] = t.Choices[i]
	}
	choices := make([]string, len(ranking))
	for i, r := range ranking {
		choices[i] = choiceOf[r]
	}
	awards := LotteryAwards(choices, t.Variants)
	if len(t.Awards) != len(t.Ranked) {
		return "", fmt.Errorf("%d awards for %d registrants", len(t.Awards), len(t.Ranked))
	}
	var winners, wait []Registrant
	won := make(map[string]int, len(t.Variants))
	for i, r := range ranking {
		if t.Ranked[i] != r || t.Awards[i] != awards[i] {
			want := "nothing"
			if awards[i] != "" {
				want = "variant " + awards[i]
			}
			return "", fmt.Errorf("rank %d (registrant %s, naming %s) wins %s by the draw, the transcript awards %q", i+1, r, choiceName(choices[i]), want, t.Awards[i])
		}
		switch {
		case awards[i] != "":
			winners = append(winners, r)
			won[awards[i]]++
		case t.Waitlist:
			wait = append(wait, r)
		}
	}
	if !slices.Equal(t.Winners, winners) {
		return "", fmt.Errorf("the winners are not the registrants awarded a variant, in rank order")
	}
	if !slices.Equal(t.Waitlisted, wait) {
		if t.Waitlist {
			return "", fmt.Errorf("the waitlist is not the registrants awarded nothing, in rank order")
		}
		return "", fmt.Errorf("a waitlist is published, but the lottery has none")
	}
	var per []string
	for _, v := range t.Variants {
		per = append(per, fmt.Sprintf("%s %d of %d", v.SKU, won[v.SKU], v.Units))
	}
	return fmt.Sprintf("%d winner(s) (%s) and %d waitlisted, each award recomputed in rank order", len(winners), strings.Join(per, ", "), len(wait)), nil
}

func choiceName(c string) string {
	if c == "" {
		return AnyVariant
	}
	return c
}

// variantTranscript completes t, the transcript of a lottery with variants
// whose registrants (Ranked, in entries' order) and ranks are set: their
// choices, and once drawn the seed and the awards recomputed from the ranks
// (as v2's winners are), which the draw made with the same function.
func variantTranscript(t DrawTranscript, l Lottery, entries []LotteryEntry) DrawTranscript {
	t.Choices = make([]string, len(entries))
	for i, e := range entries {
		t.Choices[i] = e.Choice
	}
	if l.DrawnAt == nil {
		t.Ranked, t.Choices = sortChosen(t.Ranked, t.Choices)
		return t
	}
	t.Seed = l.DrawSeed
	t.Awards = LotteryAwards(t.Choices, t.Variants)
	for i, r := range t.Ranked {
		switch {
		case t.Awards[i] != "":
			t.Winners = append(t.Winners, r)
		case t.Waitlist:
			t.Waitlisted = append(t.Waitlisted, r)
		}
	}
	return t
}
