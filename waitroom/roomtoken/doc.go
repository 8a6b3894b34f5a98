// Package roomtoken holds tickets, admission tokens, the challenge, the
// documents origins and edges exchange.
//
// It signs and verifies what the waiting room hands out and
// what passes between its instances, so that no instance keeps a row per
// waiter:
//
//   - tickets (ticket.go: a place in line, held by the client) and admission
//     tokens (admission.go: the right to reserve), HS256 JWTs (jwt.go) that
//     any instance verifies with the shared Keyring (keyring.go), and an edge
//     worker holding the same keys with any JWT library;
//   - the proof of work asked before admission, whose nonce is derived from
//     the ticket (challenge.go), and the one asked to register in a lottery
//     (registration.go);
//   - the edge's documents (documents.go): the watermarks an origin publishes
//     for its edges, the draw's seed sealed in them, and the edges' signed
//     reports and leases.
//
// Only an admission token's single use is enforced in the database, by the
// unique admission id stored with the reservation (AdmissionID).
package roomtoken
