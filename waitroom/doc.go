// Package waitroom is the waiting room in front of a sale's purchase path:
// signed tickets, paced admission, admission tokens, and the proof-of-work
// challenge.
//
// It keeps no row per waiter: a ticket and an admission token are HS256 JWTs
// (jwt.go, ticket.go, admission.go) that any instance verifies with the
// shared Keyring (keyring.go), and an edge worker holding the same keys with
// any JWT library; the challenge nonce is derived from the ticket
// (challenge.go). Only the
// admission token's single use is enforced in the database, by the unique
// admission id stored with the reservation.
package waitroom
