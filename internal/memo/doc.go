// Package memo holds what verifying a signed token found, remembered.
//
// It remembers what verifying a signed token found, so that a token
// presented again and again (a customer's bearer token on every request, a
// waiting-room ticket on every status poll) is verified once, not on every
// request: HMAC, base64 and JSON decoding were the largest costs of the
// answers that should be cheapest (a sold-out "no", a status poll).
//
// Only tokens that verified are put in, with the time they stop being good,
// and a lookup checks that time against the caller's clock, so a hit gives
// exactly the answer verifying again would. The key is the whole token: a
// client can only add an entry by presenting a token that verifies, that is
// one the service's secret signed. The memo is bounded; when full, an
// arbitrary eighth of it is dropped (Go's map order), which costs the
// dropped tokens one verification each the next time.
package memo
