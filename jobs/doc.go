// Package jobs holds River's workers, on the root's `JobStore` and a `Gate` of
// their own (cmd/flashline passes the adapters).
//
// It holds Flashline's River jobs, one file per kind: the expiry
// sweeper (sweep.go), the invariant check (invariant.go), idempotency-key
// pruning (prune.go), the Redis gate's relay and checks (gate.go), the
// lottery's draw, purchase windows and notifications (lottery.go), and
// the River client that runs them inside
// `flashline serve`. Periodic jobs run on River's elected leader, so any
// number of instances may run workers at once.
package jobs
