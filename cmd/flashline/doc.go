// Command flashline holds the binary: `serve` and its parts, the operator's
// commands.
//
// It is the flash-sale service and its tools: serve, migrate,
// sale, gate, check, incident, pay, payments, solve, token, devdb and page.
// See run.go. The load generator is cmd/flashline-loadtest.
package main
