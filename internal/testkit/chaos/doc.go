// Package chaos holds the fault harness.
//
// It is Flashline's fault harness, Jepsen-style: several real
// `flashline serve` processes (built with -race) share one PostgreSQL cluster
// of their own, each reaching it through a proxy of Shopify's toxiproxy used
// in process; a load of buyers with retrying clients runs against them while
// one fault at a time is injected (a SIGKILL mid-batch, mid-confirm or
// mid-sweep, PostgreSQL restarted fast or immediately, its connections
// exhausted, latency, stalls, bandwidth limits and resets on the wire, clocks
// that disagree between instances; with the Redis gate on, the same kinds of
// trouble between the instances and Redis; and the primary of a primary and
// streaming standby crashed and the standby promoted; and an instance
// killed mid-batch on a sale with variants); then every operation the
// clients saw is checked.
//
// The pieces, one file each:
//
//   - cluster.go: the PostgreSQL cluster (internal/devdb in a temporary
//     folder, its own port, track_commit_timestamp on, stopped at the end),
//     the gate's redis-server (internal/testkit/testredis, on a loopback port, no
//     persistence, started by the first gated run, stopped at the end) and
//     the toxiproxy server. Upstreams names what the proxies stand in front
//     of: "postgres", and "redis" in the gated runs.
//   - gate.go: the gated runs: the Redis gate on (every instance reaching
//     Redis through a proxy of its own), a sale created with "gate":
//     "redis", faults on the Redis side (latency, stall, resets,
//     redis-server killed and started again empty) and an instance killed
//     mid-reserve; the harness plays the operator when the gate job paused
//     the sale (rebuild, resume); and the gate's own checks: sold_out
//     against the units the counter may have been without, sale_not_open
//     only while the sale was paused, the counter back in agreement with the
//     database after the load, no gate incident the fault cannot cause.
//   - replica.go: the failover runs' database: a primary and a streaming
//     standby of the run's own (internal/devdb: pg_basebackup -R, the
//     standby following through a toxiproxy proxy, its replication link),
//     synchronous (synchronous_standby_names = '*') or not; the instances
//     reach both through a multi-host URL (target_session_attrs=read-write),
//     a proxy per node; a failover stops the primary immediately, clears
//     synchronous_standby_names on the standby and promotes it, and the
//     next round first makes the old primary a standby of the new one.
//     Every 201 is replayed once the load is over: the new primary must
//     answer it byte for byte. With asynchronous replication, what was
//     lost is reported (Loss, CheckLossy) instead of failing the run; more
//     units sold than the new primary's stock still fails it.
//   - variants.go: the run on a sale with variants (Fault.Variants): the
//     sale created with them, its stock split among them; the buyers
//     reserve a variant chosen at random and switch on variant_sold_out
//     (workload.go); the model holds each variant's units (VariantsModel:
//     a hold takes its variant's, a read shows each variant's), every
//     variant_sold_out is checked against its variant's own timeline, and
//     each variant's accounting against the database (stock + pending +
//     confirmed = its units, its ledger, the sale_variant_invariant view).
//     Gated (gate-kill-batch-variants, redis-kill-variants: the long form
//     only, or named), a variant_sold_out may also meet a moment when its
//     units less those its own counter may have been without were short
//     (the units owed back to it: gate_outbox.variant), and after the load
//     each variant's counter must agree with its stock rows, drift 0.
//   - run.go: one run of one fault: a fresh database, the instances, the sale,
//     the load, the fault, the quiet period, the checks, the figures.
//   - workload.go: buyers whose every logical operation (reserve, confirm,
//     cancel, read a reservation) is retried, with the same Idempotency-Key,
//     on another instance until it has a definite answer; and a reader of the
//     sale's counts.
//   - faults.go: the faults, each injected and healed by the harness.
//   - history.go: every attempt and every logical operation, with its
//     invocation and completion as the client saw them.
//   - model.go: the sale as a porcupine model (stock, each customer's holds
//     and idempotency keys); the sweeper's expirations enter the history as
//     operations too, timed by the database's own clock (expired_at and the
//     commit timestamp of the expiring transaction).
//   - timeline.go: the sale's units by state over time, from the database's
//     insert-only tables (stock_ledger, orders) and their commit timestamps;
//     reads of the sale and sold_out answers are checked against it, each
//     transaction visible somewhere between its commit timestamp and its
//     client's answer.
//   - check.go: porcupine's linearizability check plus the accounting checks
//     against the database (every 201 is exactly one reservation row and
//     every row a 201 some client saw, one active hold per customer, stock +
//     pending + confirmed == initial, the ledger sums to the stock and each
//     hold is restocked at most once, one order per confirmed hold) and the
//     clock checks (no hold expires before its expiresAt, no confirm succeeds
//     after it). A failing history is written as porcupine's visualisation.
//     Reads of the sale made during an operation longer than a second (one
//     retried across an outage) are left to the timeline check: with them
//     porcupine's search ran out of time after a failover.
//
// A run is reproducible from its seed: the buyers' scripts, the instance
// each attempt goes to, the victim of a fault and its parameters all come
// from it (what the machine's scheduler does with them does not).
package chaos
