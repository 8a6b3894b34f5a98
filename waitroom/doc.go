// Package waitroom is the waiting room in front of a sale's purchase path:
// signed tickets, paced admission, admission tokens, and the proof-of-work
// challenge.
//
// It keeps no row per waiter: a ticket and an admission token are HMAC-signed
// tokens (token.go) that any instance can verify with the shared Keyring, and
// the challenge nonce is derived from the ticket (challenge.go). Only the
// admission token's single use is enforced in the database, by the unique
// admission id stored with the reservation.
package waitroom
