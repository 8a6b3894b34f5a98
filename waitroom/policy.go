package waitroom

import (
	"context"
	"fmt"
	"time"

	"github.com/flashline/flashline"
)

// Policy is a sale's published fairness policy.
type Policy struct {
	Policy      flashline.Fairness
	Description string
	// Draw is the commitment to the sale's draw seed, and from the open the
	// seed itself (flashline.DiscloseDraw).
	Draw flashline.DrawDisclosure
	// Title, ImageURL ("": none) and OpensAt (nil: when an operator opens
	// it) are what the page shows of the sale.
	Title    string
	ImageURL string
	OpensAt  *time.Time
}

// Policy returns the sale's fairness policy in words a customer can read,
// with the other rules that decide who gets in.
func (r *Room) Policy(ctx context.Context, saleID string) (Policy, error) {
	s, _, err := r.room(ctx, saleID)
	if err != nil {
		return Policy{}, err
	}
	// The seed is revealed once the database's clock (as last read) says the
	// sale has opened: by then the pre-open draw is fixed, and nobody can
	// take a pre-open place any more.
	p := Policy{Policy: s.Room.Fairness, Draw: flashline.DiscloseDraw(s.Room.DrawSeed, s.Opened(s.DBNow)),
		Title: s.Title, ImageURL: s.ImageURL, OpensAt: s.OpensAt}
	switch s.Room.Fairness {
	case flashline.FairnessArrivalOrder:
		p.Description = "Everyone is placed in the order they joined the waiting room, before and after the sale opens. " +
			"Refreshing the page or joining again never moves you forward."
	default:
		p.Description = "Everyone who joins the waiting room before the sale opens is placed by a random draw made for your account and this sale: " +
			"joining early, refreshing the page or joining again does not change your place, so there is no need to rush. " +
			"People who join after the sale opens (by more than a quarter of a second) are placed after them, in the order they join."
	}
	p.Description += " People are let in at the pace the checkout can handle, and each admission is good for one reservation for a limited time."
	if s.Room.ChallengeBits > 0 {
		p.Description += " Before you are let in, your browser solves a small puzzle; this slows down automated buying."
	}
	if s.Room.MinAccountAgeSeconds > 0 {
		p.Description += fmt.Sprintf(" Accounts created less than %s before joining cannot take part.", humanDuration(s.Room.MinAccountAgeSeconds))
	}
	// Operators void orders after the fact (POST /admin/reservations/{id}/void,
	// refunds): customers are told before they buy.
	p.Description += " The store may cancel an order after it is made if it matches patterns of automated buying, or when its payment is refunded;" +
		" the item then goes back on sale and any payment is refunded."
	if s.Room.Fairness == flashline.FairnessRandomizedAtOpen {
		p.Description += " Before the open this policy publishes a commitment to the draw's secret seed (its SHA-256); from the open, the seed itself:" +
			" anyone can then check it against the commitment and recompute every customer's draw."
		p.Description += crowdBeacon(s.Room)
	}
	return p, nil
}

// crowdBeacon says what the pre-open crowd's ranks rest on besides the
// store's seed: a public beacon's round, or, without one, nothing.
func crowdBeacon(r flashline.RoomFacts) string {
	switch {
	case !r.Beacon:
		return " This store has no public randomness beacon: whoever knows the seed before the open, the store included, could compute the ranks of the crowd."
	case r.BeaconRound == 0:
		return " The ranks of the crowd also use a round of a public randomness beacon, fixed when the crowd is frozen at the open and published after it," +
			" so nobody, the store included, can know them before then; nobody is let in before that round is published."
	}
	return fmt.Sprintf(" The ranks of the crowd also use round %d of a public randomness beacon, published a few seconds after the open,"+
		" so nobody, the store included, can know them before then; nobody is let in before that round is published.", r.BeaconRound)
}

func humanDuration(secs int) string {
	switch {
	case secs%86400 == 0:
		return plural(secs/86400, "day")
	case secs%3600 == 0:
		return plural(secs/3600, "hour")
	case secs%60 == 0:
		return plural(secs/60, "minute")
	}
	return plural(secs, "second")
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}

// HumanDuration says secs in words ("10 minutes", "1 day"), as the policies
// do.
func HumanDuration(secs int) string { return humanDuration(secs) }
