package edge

import (
	"github.com/flashline/flashline"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

// variantFacts are the document's variants as the sale cache holds them.
// The document says each one's availability, never its counts, so each
// gets the smallest counts that tell the same (AvailabilityOf): the
// edge's status answers carry the variants the origin's do, and an edge,
// which serves no purchase path, needs the counts for nothing else.
func variantFacts(vs []roomtoken.EdgeVariant) []flashline.VariantFacts {
	if len(vs) == 0 {
		return nil
	}
	out := make([]flashline.VariantFacts, len(vs))
	for i, v := range vs {
		out[i] = flashline.VariantFacts{SKU: v.SKU, Title: v.Title}
		switch v.Availability {
		case flashline.Available:
			out[i].InitialStock, out[i].Available = 1, 1
		case flashline.FewLeft:
			out[i].InitialStock, out[i].Available = 10, 1
		default: // sold out
			out[i].InitialStock, out[i].Available = 1, 0
		}
	}
	return out
}
