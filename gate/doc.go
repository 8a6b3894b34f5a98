// Package gate holds the optional Redis gate: its scripts, the Store it wraps,
// the relay, the checks, the rebuild; what it reads of memory (`Memory`).
//
// It is the optional Redis gate of peak sales: a counter in Redis,
// in front of the stock rows, that decides who may try to reserve, so that
// only its winners reach PostgreSQL. PostgreSQL still decides who gets a
// unit: its conditional UPDATE stays the backstop, so a gate that is wrong
// can cost a sale, never oversell one.
//
// Every unit the gate hands out is numbered (its seq) and ends in exactly one
// of two places, both decided in PostgreSQL under the customer's advisory
// lock: a reservation that holds it (reservations.gate_seq), or a return
// (gate_outbox), written by the instance whose request did not reserve with
// it, or after a grace period by the gate job for a request that died. Units
// come back to the counter only through gate_outbox: a return, or a restock
// (cancel, expiry, void) that a trigger writes in the statement that
// restocks. The relay applies each movement to Redis with a script that
// records its id, so a relay that dies half way, or two relays, apply it
// once. One writer per direction: the gate script decrements, the relay
// increments.
//
// A gated sale fails closed: an instance without Redis, a Redis that does not
// answer within Options.Timeout, or a counter that is missing answers
// ErrUnavailable (503 sale_paused_fail_closed), never an uncounted sale; the
// gate job pauses the sale with an incident, and it opens again only after a
// rebuild from the database (Rebuild) and an admin's resume.
//
// A sale with variants has a counter per variant (the unit comes from, and
// goes back to, its variant's; drift, reconciling and the rebuild are per
// variant), and its buyers, attempts and unit numbers are the sale's; a sale
// without variants has one counter, its keys as before variants.
//
// Files: gate.go (the Gate and its Redis scripts), reserve.go (the Store it
// wraps), relay.go, maintain.go (reconciling units, drift, incidents),
// view.go (one check's reading of a sale and its drift, per counter),
// rebuild.go. What it needs of the database is flashline.GateStore.
package gate
