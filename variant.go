package flashline

import (
	"regexp"
	"strconv"
)

// Limits on a sale's variants (issue 49: sizes, tiers, editions of one
// release, sold through one admission).
const (
	MaxVariants = 100
	// MaxVariantSKULength is the longest variant SKU, in bytes.
	MaxVariantSKULength = 64
	// MaxVariantStock is the most units one variant may have.
	MaxVariantStock = 100_000_000
	// VariantBucketStride is how far apart the stock rows of two variants
	// are numbered: the variant at position p owns buckets p*64 to
	// p*64+buckets-1 (migration 000026).
	VariantBucketStride = MaxBuckets
)

// variantSKU is a variant's SKU: letters, digits, '.', '_' and '-', from a
// letter or digit, at most 64 bytes (the sale_variants_sku_format CHECK).
var variantSKU = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ValidVariantSKU reports whether s has the form of a variant's SKU.
func ValidVariantSKU(s string) bool { return variantSKU.MatchString(s) }

// NewVariant is one variant of a new sale.
type NewVariant struct {
	SKU string
	// Title is what shoppers see ("": the SKU).
	Title string
	Stock int
	// Buckets splits the variant's stock over that many rows (default 1).
	Buckets int
}

// Variant is one variant of a sale, with its live counts in units (an
// admin's view: shoppers see only its Availability).
type Variant struct {
	SKU          string
	Title        string
	InitialStock int
	Available    int
	Pending      int
	Confirmed    int
	// OK: its stock adds up (the invariant, per variant).
	OK bool
}

// Availability is what shoppers are told of a variant's stock: never the
// count, which would invite scraping.
type Availability string

// Availabilities.
const (
	Available Availability = "available"
	FewLeft   Availability = "few_left"
	SoldOut   Availability = "sold_out"
)

// AvailabilityOf says how a variant of initial units with available left
// stands: few left at a tenth of its stock or less (and at most 10 units
// for a variant of up to 100), sold out at none.
func AvailabilityOf(available, initial int64) Availability {
	switch {
	case available <= 0:
		return SoldOut
	case available*10 <= initial || available <= min(10, initial/10):
		return FewLeft
	}
	return Available
}

// validateVariants checks a new sale's variants and fills in their
// defaults; the sale's InitialStock becomes their sum and its Buckets the
// most any of them has.
func (n *NewSale) validateVariants() error {
	if len(n.Variants) > MaxVariants {
		return Invalid("variants must be 1-100")
	}
	// A sale validated before (its caller's, then the store's) has its
	// InitialStock and Buckets from its variants already.
	given := n.InitialStock != 0 || n.Buckets != 0
	seen := make(map[string]bool, len(n.Variants))
	total, most := 0, 1
	for i := range n.Variants {
		v := &n.Variants[i]
		at := "variants[" + strconv.Itoa(i) + "]"
		switch {
		case !variantSKU.MatchString(v.SKU):
			return Invalid(at + ".sku must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
		case seen[v.SKU]:
			return Invalid(at + ".sku " + v.SKU + " appears twice")
		case v.Stock < 1 || v.Stock > MaxVariantStock:
			return Invalid(at + ".stock must be between 1 and 100000000")
		}
		if n.Admission == AdmissionLottery && v.SKU == AnyVariant {
			// A registration names "any" to take any variant.
			return Invalid(at + `.sku "any" is what a lottery's registration names to take any variant: a lottery's variant needs another SKU`)
		}
		seen[v.SKU] = true
		if v.Buckets == 0 {
			v.Buckets = 1
		}
		switch {
		case v.Buckets < 1 || v.Buckets > MaxBuckets:
			return Invalid(at + ".buckets must be between 1 and 64")
		case v.Buckets > v.Stock:
			return Invalid(at + ".buckets must not exceed its stock")
		}
		if err := validTitle(v.Title); err != nil {
			return Invalid(at + "." + err.Error())
		}
		if v.Title == "" {
			v.Title = v.SKU
		}
		total += v.Stock
		most = max(most, v.Buckets)
	}
	if total > 100_000_000 {
		return Invalid("the variants' stock must add up to at most 100000000")
	}
	switch {
	case given && n.InitialStock != total:
		return Invalid("initialStock goes with a sale without variants: a sale with variants has each variant's stock")
	case given && n.Buckets != most:
		return Invalid("buckets goes with a sale without variants: a sale with variants has each variant's buckets")
	}
	n.InitialStock, n.Buckets = total, most
	return nil
}

// VariantStock is how a variant's stock is spread over its rows: the
// bucket numbers it owns (from position*VariantBucketStride) and each one's
// opening quantity.
func VariantStock(position int, v NewVariant) (buckets, quantities []int32) {
	buckets, quantities = make([]int32, v.Buckets), make([]int32, v.Buckets)
	for b := range buckets {
		buckets[b] = int32(position*VariantBucketStride + b)
		quantities[b] = int32(v.Stock / v.Buckets)
		if b < v.Stock%v.Buckets {
			quantities[b]++
		}
	}
	return buckets, quantities
}
