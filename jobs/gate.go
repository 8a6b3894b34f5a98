package jobs

import (
	"context"
	"errors"

	"github.com/riverqueue/river"
)

// Gate is what the jobs ask of the Redis gate (package gate's Gate, which
// cmd/flashline passes in Config.Gate).
type Gate interface {
	// Relay applies every movement owed to the gate's counters and reports
	// how many it applied.
	Relay(ctx context.Context) (int, error)
	// Maintain returns the units of requests that died and checks every
	// counter against the database, pausing a sale whose counter is wrong.
	Maintain(ctx context.Context) error
	// Kick asks the gate to relay now, without waiting.
	Kick()
}

// GateArgs is the Redis gate's job.
type GateArgs struct{}

// Kind implements river.JobArgs.
func (GateArgs) Kind() string { return "flashline_gate" }

// GateWorker looks after gated sales every second: it relays the units owed
// back to their counters (returns and restocks the instances did not relay
// at once), returns the units of requests that died, and checks every
// counter against the database, pausing a sale whose counter is missing,
// unreachable or above what the database allows (Gate.Maintain).
type GateWorker struct {
	river.WorkerDefaults[GateArgs]
	gate Gate
}

// Work implements river.Worker.
func (w *GateWorker) Work(ctx context.Context, _ *river.Job[GateArgs]) error {
	_, err := w.gate.Relay(ctx)
	return errors.Join(err, w.gate.Maintain(ctx))
}
