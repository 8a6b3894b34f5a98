package flashline

// RepairBucket is one bucket's line of a repair plan: what each source says
// the bucket holds.
type RepairBucket struct {
	Bucket int
	// Variant is the SKU of the variant whose stock row it is ("" in a
	// sale without variants, and in totals).
	Variant string
	// Stock is what the stock row says.
	Stock int
	// Opening is the bucket's share of the initial stock, and Held the units
	// its pending and confirmed reservations hold: Implied = Opening - Held
	// is what the reservations imply the bucket holds.
	Opening, Held, Implied int
	// Ledger is what the bucket's ledger rows sum to.
	Ledger int
}

// Unrecorded is the change to the stock row that no ledger row records
// (stock - ledger): a second write path, or a ledger row changed by hand.
func (b RepairBucket) Unrecorded() int { return b.Stock - b.Ledger }

// Correction is the change the repair makes to the stock row (implied -
// stock).
func (b RepairBucket) Correction() int { return b.Implied - b.Stock }

// RepairPlan is what `flashline sale repair` shows, and with --apply does:
// per bucket, record the unrecorded change in the ledger and set the stock
// to what the reservations imply, recording that too. Afterwards stock =
// ledger = initial - pending - confirmed, per bucket and so per variant
// and per sale. In a sale with variants each bucket is a variant's: its
// opening is its share of its variant's initial stock, and its reservations
// and ledger rows are its own, so each variant is checked and repaired
// against its own.
type RepairPlan struct {
	SaleID  string
	State   SaleState
	Buckets []RepairBucket
	// Applied: the repair was written (by Operator), in one transaction.
	Applied  bool
	Operator string
}

// Total sums the buckets.
func (p RepairPlan) Total() RepairBucket {
	t := RepairBucket{Bucket: -1}
	for _, b := range p.Buckets {
		t.add(b)
	}
	return t
}

// add sums b's counts into t.
func (t *RepairBucket) add(b RepairBucket) {
	t.Stock += b.Stock
	t.Opening += b.Opening
	t.Held += b.Held
	t.Implied += b.Implied
	t.Ledger += b.Ledger
}

// Needed reports whether any bucket's sources disagree.
func (p RepairPlan) Needed() bool {
	for _, b := range p.Buckets {
		if b.Unrecorded() != 0 || b.Correction() != 0 {
			return true
		}
	}
	return false
}

// VariantTotals sums the buckets of each variant, in the plan's order (each
// total's Bucket -1, its Variant the SKU); none for a sale without variants.
func (p RepairPlan) VariantTotals() []RepairBucket {
	var out []RepairBucket
	for _, b := range p.Buckets {
		if b.Variant == "" {
			continue
		}
		if len(out) == 0 || out[len(out)-1].Variant != b.Variant {
			out = append(out, RepairBucket{Bucket: -1, Variant: b.Variant})
		}
		out[len(out)-1].add(b)
	}
	return out
}
