package api

// Gate is what counts the sale's units in front of the database, and
// for a Redis gate how its counter stands: counter as Redis holds it (-1:
// missing or unreachable), drift = available in the database − counter −
// units owed back − units in flight, ok when they agree and the counter is
// not being rebuilt.
//
// A gated sale with variants has a counter per variant: counter is then
// their sum, drift the drift of the variant furthest off, and variants each
// one's own.
type Gate struct {
	Kind     string        `json:"kind"` // none or redis
	Counter  *int64        `json:"counter,omitempty"`
	Drift    *int64        `json:"drift,omitempty"`
	OK       *bool         `json:"ok,omitempty"`
	Variants []GateVariant `json:"variants,omitempty"`
}

// GateVariant is how one variant's counter of a gated sale stands.
type GateVariant struct {
	SKU     string `json:"sku"`
	Counter int64  `json:"counter"`
	Drift   int64  `json:"drift"`
}
