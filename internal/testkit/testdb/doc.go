// Package testdb holds a migrated database per test.
//
// It gives each test its own real PostgreSQL database, created
// from a migrated template, so tests can commit, run concurrently, use
// LISTEN/NOTIFY and run workers without seeing each other.
//
// The server comes from FLASHLINE_TEST_DATABASE_URL, else DATABASE_URL, else
// the development cluster in <repo>/.devdb that `make test` starts. No
// database is a failure, never a skip.
package testdb
