// Package flashline holds the domain: sales, reservations, payments,
// lotteries, the `Store` interface, the refusals decided without the database,
// errors, the checks of client-controlled values.
//
// It is the domain of a flash-sale service for stores that run on
// one PostgreSQL primary: sales and their state machine, reservations, the
// customers acting on them, and the errors the rest of the program speaks in.
// It is the hub: every type that crosses a package boundary lives here, so
// that the packages around it lean on it and not on each other. It imports no
// driver and no web framework: the postgres package implements the stores,
// the handlers package serves them over HTTP, and package salecache, gate and
// waitroom answer from memory (or Redis) what they can.
//
// One file per entity: sale.go (a sale, its rules and states), reservation.go
// (a hold, its receipt and the reserve request), customer.go (who acts),
// payment.go, lottery.go, store.go (what the database does), errors.go, and
// the value checks every client-controlled string goes through (id.go,
// text.go, instrument.go). What the parts in front of the database need of
// it: facts.go (the sale cache's SaleFacts and their FactSource),
// gatestore.go (the Redis gate's GateStore), roomstore.go (the waiting
// room's RoomStore and its pacer's PacerStore); draw.go is the draw's pure
// math (the keyed Draw, its commitment and the audits of a room's admissions
// and of a lottery).
package flashline
