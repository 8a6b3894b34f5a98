// Package loadtest holds the load generator's scenarios and report.
//
// It is `flashline-loadtest` (cmd/flashline-loadtest): a load generator and scenario
// runner that speaks only the HTTP contract, prints a summary table, and
// verifies at the end, from the admin API, that nothing was oversold or
// duplicated.
//
// Scenarios:
//   - northline: 500 buyers at once for 200 units, then a retry storm in which
//     about 15% of first attempts are abandoned after a few milliseconds and
//     retried with the same key.
//   - hot: closed loop; Clients concurrent buyers reserve one hot SKU as fast
//     as they can for Duration: the most successful reservations per second.
//   - overload: open loop at Rate requests/s for Duration (vegeta paces it),
//     with /healthz probed alongside: does goodput hold and the store stay up?
//   - crowd: Clients customers through a waiting-room sale of Stock units that
//     opens OpenIn after the start (half arrive before): tickets, polls at the
//     server's pace, the challenge, reserve once admitted. How is admission
//     paced, and what did the crowd cost?
//   - no: the answers that should cost what a route costs, back to back on
//     one instance over Clients keep-alive connections: /healthz, then a
//     sold-out sale's reservations, then waiting-room status polls, each as
//     answers per second and as a ratio to /healthz (no.go).
package loadtest
