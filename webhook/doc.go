// Package webhook holds the signatures of payment events.
//
// It is how the payment side proves that a payment event is
// its own: the Flashline-Signature header, the scheme Stripe's webhooks use
// (and Stripe's own Stripe-Signature, verified the same way), and Adyen's
// notification HMAC (adyen.go).
//
//	Flashline-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">
//
// The HMAC key is the shared secret (FLASHLINE_PAYMENT_WEBHOOK_SECRET). The
// sender may give several v1 values (one per secret while it rotates them);
// an event is authentic when one of them matches. The timestamp is signed
// with the body, so an event captured on the wire can be replayed only
// within the tolerance (5 minutes), and the event id makes that replay
// harmless (it is applied once).
package webhook
