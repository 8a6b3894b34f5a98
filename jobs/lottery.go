package jobs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/webhook"
)

// LotteryArgs is the lottery's job: it makes the draws that are due and
// ends the purchase windows that are over (passing units down the
// waitlist). It runs every second on River's leader; that it happens once is
// the database's part (JobStore.DrawLottery, ExpireWindows), so any
// number of runs, on any instances, at once, draw each lottery once.
type LotteryArgs struct{}

// Kind implements river.JobArgs.
func (LotteryArgs) Kind() string { return "flashline_lottery" }

// LotteryWorker runs LotteryArgs.
type LotteryWorker struct {
	river.WorkerDefaults[LotteryArgs]
	store      flashline.JobStore
	grace      time.Duration
	logger     *slog.Logger
	beacon     Beacon
	beaconWait time.Duration
}

// Work implements river.Worker: it commits the registrants of the lotteries
// whose registration closed, makes the draws that are due (each once its
// beacon round is had and verified), and ends the purchase windows that are
// over.
func (w *LotteryWorker) Work(ctx context.Context, _ *river.Job[LotteryArgs]) error {
	commits, err := w.store.CommitClosed(ctx)
	for _, c := range commits {
		w.logger.InfoContext(ctx, "jobs: lottery registrants committed", "sale_id", c.SaleID, "registrants", c.Count, "root", fmt.Sprintf("%x", c.Root))
	}
	if err != nil {
		return err
	}
	due, err := w.store.DueDraws(ctx)
	if err != nil {
		return err
	}
	for _, d := range due {
		if err := w.draw(ctx, d); err != nil {
			return err
		}
	}
	crowds, err := w.store.DueCrowds(ctx)
	if err != nil {
		return err
	}
	for _, d := range crowds {
		if err := w.drawCrowd(ctx, d); err != nil {
			return err
		}
	}
	windows, err := w.store.ExpireWindows(ctx, w.grace)
	for _, r := range windows {
		if r.Expired > 0 {
			w.logger.InfoContext(ctx, "jobs: lottery windows ended", "sale_id", r.SaleID, "expired", r.Expired, "promoted", r.Promoted)
		}
	}
	return err
}

// NotifyArgs is the job that delivers the lottery's notifications (the
// outbox, lottery_notifications) to the store's webhook.
type NotifyArgs struct{}

// Kind implements river.JobArgs.
func (NotifyArgs) Kind() string { return "flashline_notify" }

// NotifyWorker delivers notifications: each is POSTed as JSON, signed with
// the Flashline-Signature header (package webhook, the scheme payment
// events use, with the notification secret), its event id in the body
// ("id") and in the Flashline-Event-Id header, so that the receiver applies
// each once. A delivery that fails (no answer, or not 2xx) is tried again
// after an exponential backoff (NotifyBackoff, doubling up to
// maxNotifyBackoff). Notifications are claimed with a lease, so instances
// never send one at the same time; a process that dies mid-delivery leaves
// it to be sent again after the lease (at least once: the receiver
// deduplicates by event id).
type NotifyWorker struct {
	river.WorkerDefaults[NotifyArgs]
	store   flashline.JobStore
	url     string
	secret  string
	backoff time.Duration
	client  *http.Client
	logger  *slog.Logger
	// sent counts delivery attempts by outcome (delivered, failed).
	sent *prometheus.CounterVec
}

func newNotifyMetrics(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flashline_lottery_notifications_total",
		Help: "Deliveries of lottery notifications to the store's webhook, by outcome (delivered, failed: tried again later).",
	}, []string{"outcome"})
	reg.MustRegister(c)
	return c
}

const (
	notifyBatch      = 100
	notifyLease      = 30 * time.Second
	notifyTimeout    = 10 * time.Second
	maxNotifyBackoff = 10 * time.Minute
)

// Work implements river.Worker.
func (w *NotifyWorker) Work(ctx context.Context, _ *river.Job[NotifyArgs]) error {
	for range maxBatchesPerRun {
		batch, err := w.store.ClaimNotifications(ctx, notifyBatch, notifyLease)
		if err != nil {
			return err
		}
		for _, n := range batch {
			if err := w.deliver(ctx, n); err != nil {
				w.sent.WithLabelValues("failed").Inc()
				backoff := notifyBackoff(w.backoff, n.Attempts)
				w.logger.WarnContext(ctx, "jobs: notification not delivered", "event_id", n.EventID, "attempt", n.Attempts, "retry_in", backoff, "err", err)
				if err := w.store.NotificationFailed(ctx, n.EventID, backoff, err.Error()); err != nil {
					return err
				}
				continue
			}
			w.sent.WithLabelValues("delivered").Inc()
			if err := w.store.NotificationDelivered(ctx, n.EventID); err != nil {
				return err
			}
		}
		if len(batch) < notifyBatch {
			return nil
		}
	}
	return nil
}

func (w *NotifyWorker) deliver(ctx context.Context, n flashline.Notification) error {
	ctx, cancel := context.WithTimeout(ctx, notifyTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(n.Payload))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(webhook.Header, webhook.Sign(time.Now(), n.Payload, w.secret))
	req.Header.Set("Flashline-Event-Id", n.EventID)
	resp, err := w.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("webhook answered %s", resp.Status)
	}
	return nil
}

// notifyBackoff is the wait before attempt+1: base, doubled per attempt, at
// most maxNotifyBackoff.
func notifyBackoff(base time.Duration, attempt int) time.Duration {
	d := base
	for i := 1; i < attempt && d < maxNotifyBackoff; i++ {
		d *= 2
	}
	return min(d, maxNotifyBackoff)
}

// draw makes one due draw: with the beacon's round when the lottery waits
// for one (beaconRound). Never drawn without the round.
func (w *LotteryWorker) draw(ctx context.Context, d flashline.DueDraw) error {
	var round *flashline.BeaconRound
	if d.Beacon != nil {
		b, err := w.beaconRound(ctx, d, "lottery draw", "the draw")
		if b == nil || err != nil {
			return err
		}
		round = b
	}
	r, err := w.store.DrawLottery(ctx, d.SaleID, round)
	if err != nil {
		return err
	}
	switch {
	case r.Drew && r.WonVariants != nil:
		// A lottery with variants: the units won of each.
		w.logger.InfoContext(ctx, "jobs: lottery drawn", "sale_id", r.SaleID, "registered", r.Registered, "won", r.Won, "won_variants", r.WonVariants)
	case r.Drew:
		w.logger.InfoContext(ctx, "jobs: lottery drawn", "sale_id", r.SaleID, "registered", r.Registered, "won", r.Won)
	}
	return nil
}

// drawCrowd ranks a randomized_at_open room's crowd, committed at the open,
// once its beacon round is had (beaconRound): until then the room admits
// nobody. A round published before the crowd was committed (the freeze
// never stores one: a safety net) cannot rank it fairly: the sale is paused
// with the reason.
func (w *LotteryWorker) drawCrowd(ctx context.Context, d flashline.DueDraw) error {
	if !d.Beacon.RoundTime(d.Round).After(d.DrawAt) {
		reason := fmt.Sprintf("waiting room: the crowd was committed at %s, after its beacon round %d was published; its ranks are never drawn with a round known before the commitment", d.DrawAt.UTC().Format(time.RFC3339Nano), d.Round)
		w.logger.ErrorContext(ctx, "jobs: crowd paused, committed after its beacon round", "sale_id", d.SaleID, "round", d.Round)
		return w.store.PauseForBeacon(ctx, d.SaleID, reason)
	}
	b, err := w.beaconRound(ctx, d, "waiting room", "the crowd's commitment")
	if b == nil || err != nil {
		return err
	}
	drew, err := w.store.DrawCrowd(ctx, d.SaleID, *b)
	if drew {
		w.logger.InfoContext(ctx, "jobs: waiting room crowd ranked", "sale_id", d.SaleID, "round", d.Round)
	}
	return err
}

// beaconRound is d's beacon round, once published and verified (nil: not
// had yet). A round not had (not published yet, the beacon unreachable, or
// one that does not verify) is asked again on the next run, until
// beaconWait past d's time (or the round's, if later): then the sale is
// paused with the reason (what waits, and since when), and waits for an
// operator to resume it. Never a fallback without the round.
func (w *LotteryWorker) beaconRound(ctx context.Context, d flashline.DueDraw, what, since string) (*flashline.BeaconRound, error) {
	roundAt := d.Beacon.RoundTime(d.Round)
	if d.Now.Before(roundAt) {
		return nil, nil // not published yet by the beacon's own schedule
	}
	b, err := w.beacon.Round(ctx, d.Beacon.PublicKey, d.Round)
	if err == nil {
		return &b, nil
	}
	deadline := d.DrawAt
	if roundAt.After(deadline) {
		deadline = roundAt
	}
	deadline = deadline.Add(w.beaconWait)
	if !d.Now.After(deadline) {
		w.logger.InfoContext(ctx, "jobs: "+what+" waits for its beacon round", "sale_id", d.SaleID, "round", d.Round, "err", err)
		return nil, nil
	}
	reason := fmt.Sprintf("%s: the beacon's round %d was not had within %s of %s (%v); the draw is never made without it: resume the sale once the beacon answers", what, d.Round, w.beaconWait, since, err)
	w.logger.ErrorContext(ctx, "jobs: "+what+" paused, no beacon round", "sale_id", d.SaleID, "round", d.Round, "err", err)
	return nil, w.store.PauseForBeacon(ctx, d.SaleID, reason)
}
