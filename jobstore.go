package flashline

import (
	"context"
	"time"
)

// JobStore is what the periodic jobs (package jobs: the expiry sweeper, the
// invariant check, the pruning, the lottery's draws, windows and
// notifications) need of the database. Each method is safe to run on any
// number of instances at once: that a unit is restocked once, a lottery
// drawn once, a notification sent by one instance at a time is the
// database's part. The postgres package implements it.
type JobStore interface {
	// ExpireDue expires up to batchSize pending reservations whose time is
	// up and returns their units to stock, each once.
	ExpireDue(ctx context.Context, batchSize int) ([]Expired, error)
	// SweepOverdue is how far past its expiry the oldest pending hold is
	// (0: none): the sweeper's lag.
	SweepOverdue(ctx context.Context) (time.Duration, error)
	// CheckInvariants checks every sale still selling or holding
	// reservations (only saleID when it is not empty); a sale that fails is
	// paused and, the first time, gets an incident.
	CheckInvariants(ctx context.Context, saleID string) ([]InvariantResult, error)
	// PruneIdempotencyKeys deletes idempotency keys older than
	// retentionSeconds, batchSize at a time, and returns how many.
	PruneIdempotencyKeys(ctx context.Context, retentionSeconds, batchSize int) (int64, error)
	// PruneRateLimits deletes rate-limit windows that ended over an hour
	// ago, batchSize at a time, and returns how many.
	PruneRateLimits(ctx context.Context, batchSize int) (int64, error)
	// CommitClosed commits the registrants of every lottery whose
	// registration has closed (their Merkle root, RegistrantsRoot), once;
	// from then no registration is accepted.
	CommitClosed(ctx context.Context) ([]CommitResult, error)
	// DueDraws lists the lotteries whose draw is due and not made, but those
	// whose sale is paused.
	DueDraws(ctx context.Context) ([]DueDraw, error)
	// DrawLottery makes a lottery's draw if it is due and not made yet,
	// exactly once however many callers try at once, with beacon, the round
	// the lottery waits for (nil: a lottery created without a beacon).
	DrawLottery(ctx context.Context, saleID string, beacon *BeaconRound) (DrawResult, error)
	// PauseForBeacon pauses a sale whose draw (a lottery's, or a waiting
	// room crowd's ranks) waited too long for its beacon round: the draw is
	// never made without it.
	PauseForBeacon(ctx context.Context, saleID, reason string) error
	// DueCrowds lists the randomized_at_open crowds committed at the open
	// that wait for their beacon round (DrawAt: the commitment's time), but
	// those whose sale is paused or closed. No rank of such a room is
	// admitted until DrawCrowd.
	DueCrowds(ctx context.Context) ([]DueDraw, error)
	// DrawCrowd ranks a committed crowd with its beacon round (verified
	// against the room's chain): its final seed is then fixed, once.
	DrawCrowd(ctx context.Context, saleID string, beacon BeaconRound) (bool, error)
	// ExpireWindows ends the lottery purchase windows that ended more than
	// grace ago without a purchase, passing each unit down the waitlist.
	ExpireWindows(ctx context.Context, grace time.Duration) ([]WindowResult, error)
	// ClaimNotifications leases up to n lottery notifications due for
	// delivery to the caller for lease.
	ClaimNotifications(ctx context.Context, n int, lease time.Duration) ([]Notification, error)
	// NotificationDelivered records a delivery: the event is not sent again.
	NotificationDelivered(ctx context.Context, eventID string) error
	// NotificationFailed records a failed delivery and when to try again.
	NotificationFailed(ctx context.Context, eventID string, backoff time.Duration, cause string) error
}

// DueDraw is a lottery whose draw is due and not made yet.
type DueDraw struct {
	SaleID string
	DrawAt time.Time
	Now    time.Time // the database's clock
	// Beacon is the chain whose round Round the draw waits for (nil: the
	// lottery was created without a beacon).
	Beacon *BeaconChain
	Round  uint64
}

// CommitResult is one lottery's registrants committed at the close.
type CommitResult struct {
	SaleID string
	Count  int
	Root   [32]byte
}

// Expired is one reservation the sweeper expired and restocked.
type Expired struct {
	ReservationID string
	SaleID        string
	Quantity      int
}

// InvariantResult is the invariant check of one sale.
type InvariantResult struct {
	SaleID string
	State  SaleState
	// Opened: the sale has opened (it is not scheduled, or its time came).
	Opened       bool
	OK           bool
	Detail       string
	InitialStock int
	Available    int
	Pending      int
	Confirmed    int
	LedgerTotal  int
	// NewIncident is set when this check found a mismatch the previous check
	// had not: the sale was paused and an incident recorded.
	NewIncident bool
	// Variants: each variant's own check, in order (none for a sale
	// without variants; at most MaxVariants).
	Variants []VariantCheck
}

// VariantCheck is one variant's invariant and units, as a check read them.
type VariantCheck struct {
	SKU                           string
	OK                            bool
	Available, Pending, Confirmed int
}

// WindowResult is what JobStore.ExpireWindows did in one lottery.
type WindowResult struct {
	SaleID   string
	Expired  int
	Promoted int
}

// Notification is one lottery notification (the outbox) claimed for
// delivery.
type Notification struct {
	EventID  string
	Payload  []byte // the JSON body to deliver
	Attempts int    // counting this one
}
