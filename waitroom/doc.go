// Package waitroom is the waiting room in front of a sale's purchase path:
// tickets (a place in line, held by the client), where a ticket stands
// (answered from memory), the proof of work asked before admission,
// admission tokens, and the pacer that lets people in at the pace the
// purchase path can absorb.
//
// It keeps no row per waiter: a ticket and an admission token are HS256 JWTs
// (jwt.go, ticket.go, admission.go) that any instance verifies with the
// shared Keyring (keyring.go), and an edge worker holding the same keys with
// any JWT library; the challenge nonce is derived from the ticket
// (challenge.go). Only the admission token's single use is enforced in the
// database, by the unique admission id stored with the reservation.
//
// The Room (room.go) reads what it knows of each sale from the sale cache
// (package salecache) and writes through a flashline.RoomStore (the
// database, as package postgres implements it): place.go hands out places
// and estimates the wait, positions.go leases the positions each instance
// hands out, status.go says where a ticket stands, policy.go publishes the
// fairness policy and the commitment to the draw's seed (the seed itself
// from the open), pace.go is the pacer. lottery.go is the lottery's
// registration proof of work. The draw's math (the keyed Draw, its
// commitment, the audits of a room's admissions and of a lottery) is the
// domain's: flashline.Draw, flashline.AuditDraw, flashline.AuditLottery.
//
// The room at the edge: watermark.go is the signed document an origin (an
// instance with the database) publishes for edges, and the edges' signed
// requests (their totals of pre-open tickets, their leases of positions); edge.go is the edge's
// side (an Edge is the Source of an edge's sale cache and the Store of its
// Room), so that a Room on an instance without a database answers as one
// with it does, and fails closed when it has lost its origins.
package waitroom
