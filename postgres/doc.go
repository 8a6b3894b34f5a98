// Package postgres holds the one persistence boundary: the `Store` on pgx.
//
// It implements flashline.Store on PostgreSQL with pgx/v5. Every
// statement it runs is a named query in sql/queries; this package decides
// which to run, in which transaction, and what the results mean.
package postgres
