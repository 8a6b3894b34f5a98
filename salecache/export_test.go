package salecache

import (
	"context"

	"github.com/flashline/flashline"
)

// Decide is what flashline.Refusals answers from this memory alone, not
// counted: ErrSoldOut or ErrSaleNotOpen, or nil when the database must
// decide.
func (c *Cache) Decide(ctx context.Context, saleID, customerID string) error {
	return flashline.NewRefusals(nil, uncounted{c}).FromMemory(ctx, saleID, customerID)
}

// uncounted is the cache's memory without its count of refusals.
type uncounted struct{ *Cache }

func (uncounted) Refused(error) {}
