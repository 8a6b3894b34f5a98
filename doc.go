// Package flashline is the domain of a flash-sale service for stores that run on
// one PostgreSQL primary: sales and their state machine, reservations, the
// customers acting on them, and the errors the rest of the program speaks in.
// It imports no driver and no web framework: the postgres package implements
// the Store, the handlers package serves it over HTTP, and package salecache
// and waitroom answer from memory what they can.
//
// One file per entity: sale.go (a sale, its rules and states), reservation.go
// (a hold, its receipt and the reserve request), customer.go (who acts),
// store.go (what the database does), errors.go, and the value checks every
// client-controlled string goes through (id.go, text.go, instrument.go).
package flashline
