// Package testpgbouncer holds a PgBouncer per test.
//
// It gives tests a real PgBouncer of their own in
// transaction pooling mode, in front of a PostgreSQL server, on a free
// loopback port, stopped when the test ends. Without the pgbouncer binary
// (Debian's pgbouncer package; `make test` installs it, as root with
// apt-get) a test is skipped, and fails under CI=true: CI must prove the
// pooled deployment.
package testpgbouncer
