package postgres

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/dbsqlc"
)

// A lottery after its draw: the purchase windows that end, the waitlist,
// and the notification outbox's delivery.

// ExpireWindows ends the purchase windows that ended more than grace ago
// without a purchase (no pending or confirmed reservation made with the
// winner's admission), and, in a lottery with a waitlist, passes each unit
// to the next waitlisted registration in draw order. Per lottery, one
// transaction under the lottery's row lock: each window expires once (its
// UPDATE is conditional on state 'won'), and each expiry promotes at most
// one registration, until the waitlist ends.
func (s *Store) ExpireWindows(ctx context.Context, grace time.Duration) ([]flashline.WindowResult, error) {
	graceSeconds := int32(math.Ceil(grace.Seconds()))
	ids, err := dbsqlc.New(s.jobs).LotteryWindowsDue(ctx, dbsqlc.LotteryWindowsDueParams{GraceSeconds: graceSeconds})
	if err != nil {
		return nil, fmt.Errorf("lottery windows due: %w", translate(err))
	}
	var results []flashline.WindowResult
	for _, id := range ids {
		r := flashline.WindowResult{SaleID: id}
		err := withTx(ctx, s.jobs, func(q *dbsqlc.Queries) error {
			lot, err := q.LotteryLock(ctx, dbsqlc.LotteryLockParams{SaleID: id})
			if err != nil {
				return err
			}
			exp, err := q.RegistrationsExpireWindows(ctx, dbsqlc.RegistrationsExpireWindowsParams{SaleID: id, GraceSeconds: graceSeconds})
			if err != nil {
				return err
			}
			r.Expired = int(exp.Expired)
			if !lot.Waitlist || exp.Expired == 0 {
				return nil
			}
			if lot.DrawVersion != flashline.DrawVersionVariants {
				pro, err := q.RegistrationsPromote(ctx, dbsqlc.RegistrationsPromoteParams{
					SaleID: id, N: exp.Expired, WindowSeconds: lot.PurchaseWindowSeconds,
				})
				r.Promoted = int(pro.Promoted)
				return err
			}
			// With variants, each unit passed down is of the variant its
			// winner held: the next waitlisted who named it or any win it.
			per := map[string]int32{}
			var skus []string
			for _, v := range exp.Variants {
				if per[v] == 0 {
					skus = append(skus, v)
				}
				per[v]++
			}
			for _, v := range skus {
				pro, err := q.RegistrationsPromote(ctx, dbsqlc.RegistrationsPromoteParams{
					SaleID: id, N: per[v], WindowSeconds: lot.PurchaseWindowSeconds, Variant: &v,
				})
				if err != nil {
					return err
				}
				r.Promoted += int(pro.Promoted)
			}
			return nil
		})
		if err != nil {
			return results, fmt.Errorf("expire lottery windows %s: %w", id, translate(err))
		}
		results = append(results, r)
	}
	return results, nil
}

// ClaimNotifications leases up to n notifications due for delivery to the
// caller for lease (another instance does not send them meanwhile).
func (s *Store) ClaimNotifications(ctx context.Context, n int, lease time.Duration) ([]flashline.Notification, error) {
	rows, err := dbsqlc.New(s.jobs).NotificationsClaim(ctx, dbsqlc.NotificationsClaimParams{
		LeaseSeconds: int32(math.Ceil(lease.Seconds())), N: int32(n),
	})
	if err != nil {
		return nil, fmt.Errorf("claim notifications: %w", translate(err))
	}
	out := make([]flashline.Notification, len(rows))
	for i, r := range rows {
		out[i] = flashline.Notification{EventID: r.EventID, Payload: r.Payload, Attempts: int(r.Attempts)}
	}
	return out, nil
}

// NotificationDelivered records a delivery: the event is not sent again.
func (s *Store) NotificationDelivered(ctx context.Context, eventID string) error {
	err := dbsqlc.New(s.jobs).NotificationDelivered(ctx, dbsqlc.NotificationDeliveredParams{EventID: eventID})
	return translate(err)
}

// NotificationFailed records a failed delivery and when to try again.
func (s *Store) NotificationFailed(ctx context.Context, eventID string, backoff time.Duration, cause string) error {
	if len(cause) > 500 {
		cause = cause[:500]
	}
	err := dbsqlc.New(s.jobs).NotificationFailed(ctx, dbsqlc.NotificationFailedParams{
		EventID: eventID, BackoffSeconds: backoff.Seconds(), LastError: &cause,
	})
	return translate(err)
}
