// Package testredis holds a Redis per test.
//
// It gives tests a real Redis: the one named by
// FLASHLINE_TEST_REDIS_URL, else a redis-server of their own, started from
// the machine's binaries on a free loopback port (as `make test` starts the
// development PostgreSQL), without persistence, and stopped when the test
// ends. Without either, a test is skipped, and fails under CI=true: CI must
// prove the gate.
package testredis
