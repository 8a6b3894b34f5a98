// Package migrations holds the schema, embedded, and River's.
//
// It holds Flashline's schema as plain SQL files for
// golang-migrate (embedded in the binary) and applies them, together with
// River's own tables, which come in through rivermigrate and nowhere else.
package migrations
