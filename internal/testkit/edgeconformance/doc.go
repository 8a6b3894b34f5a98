// Package edgeconformance holds one suite of what an edge answers in front
// of real origins, run against every edge: the Go edge and the Worker.
//
// Run starts two origins on a database of the test's own and an edge in
// front of them (through the function it is given: `flashline serve --role
// edge` in cmd/flashline's TestEdgeConformance, the Worker on workerd in
// waitroom/worker's TestWorkerEdgeConformance), and checks through the edge:
// pre-open tickets and places, what is passed on (spread over both
// origins), the status stream, the draw, admission and a purchase with it,
// an edge whose clock is off, an origin down (the other answers) and a
// stale document (both down: fail closed, then admitted again).
package edgeconformance
