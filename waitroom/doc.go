// Package waitroom holds the waiting room: tickets, the pacer, an origin's
// side of the edges; what it reads of memory (`Memory`).
//
// It is the waiting room in front of a sale's purchase path:
// tickets (a place in line, held by the client), where a ticket stands
// (answered from memory), the proof of work asked before admission,
// admission tokens, and the pacer that lets people in at the pace the
// purchase path can absorb.
//
// It keeps no row per waiter: tickets, admission tokens and challenge
// nonces are package roomtoken's, signed and verified with the shared
// Keyring by any instance.
//
// The Room (room.go) reads what it knows of each sale from memory (Memory,
// the sale cache of package salecache: flashline.SaleFacts and their
// RoomFacts) and writes through a flashline.RoomStore (the database, as
// package postgres implements it, or on an edge its origins, package edge):
// place.go hands out places and estimates the wait, positions.go leases the
// positions each instance hands out, status.go says where a ticket stands,
// policy.go publishes the fairness policy and the commitment to the draw's
// seed (the seed itself from the open), pace.go is the pacer (one instance
// leads it: flashline.PacerStore). The draw's math (the keyed Draw, its commitment,
// the audits of a room's admissions and of a lottery) is the domain's:
// flashline.Draw, flashline.AuditDraw, flashline.AuditLottery.
//
// The room at the edge: origin.go is an origin's side (the watermarks
// document it publishes for edges, the edges' reports of their pre-open
// tickets and their leases of positions); package edge is the edge's side,
// so that a Room on an instance without a database answers as one with it
// does, and fails closed when it has lost its origins.
package waitroom
