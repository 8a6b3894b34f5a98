package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
)

// TestLotteryDrawRacesRegistrations: customers register as fast as they can
// while registration closes and several draws start at once. Exactly one
// draw happens, every registration that was accepted is in it, and every
// one after it is refused.
func TestLotteryDrawRacesRegistrations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newStore(t)
	now := time.Now()
	closes := now.Add(1500 * time.Millisecond)
	sale, err := s.CreateSale(ctx, flashline.NewSale{SKU: "sku_lottery", InitialStock: 5, Admission: flashline.AdmissionLottery,
		Confirmation: flashline.ConfirmByCustomer,
		Lottery: &flashline.LotteryRules{RegistrationOpensAt: now.Add(-time.Second), RegistrationClosesAt: closes,
			DrawAt: closes, PurchaseWindowSeconds: 60, Waitlist: true}})
	require.NoError(t, err)
	require.NotNil(t, sale.Lottery)

	var (
		accepted atomic.Int64
		refused  atomic.Int64
		draws    atomic.Int64
		wg       sync.WaitGroup
		stop     = make(chan struct{})
	)
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("cust_%d_%d", w, i)
				_, err := s.Register(ctx, flashline.NewRegistration{SaleID: sale.ID, CustomerID: id, PaymentInstrument: "card-" + id})
				switch {
				case err == nil:
					accepted.Add(1)
				case errors.Is(err, flashline.ErrRegistrationClosed):
					refused.Add(1)
				default:
					t.Errorf("register %s: %v", id, err)
					return
				}
			}
		})
	}
	for range 4 {
		wg.Go(func() {
			for {
				r, err := s.DrawLottery(ctx, sale.ID, nil)
				if err != nil {
					t.Errorf("draw: %v", err)
					return
				}
				if r.Drew {
					draws.Add(1)
				}
				var drawn bool
				if err := pool.QueryRow(ctx, `SELECT drawn_at IS NOT NULL FROM lotteries WHERE sale_id = $1`, sale.ID).Scan(&drawn); err != nil || drawn {
					return
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	time.Sleep(time.Until(closes) + 500*time.Millisecond)
	close(stop)
	wg.Wait()

	require.EqualValues(t, 1, draws.Load(), "one draw")
	require.Positive(t, accepted.Load())
	require.Positive(t, refused.Load())
	var total, undrawn, won int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'registered'), count(*) FILTER (WHERE state = 'won')
		FROM lottery_registrations WHERE sale_id = $1`, sale.ID).Scan(&total, &undrawn, &won))
	require.EqualValues(t, accepted.Load(), total, "every accepted registration is stored")
	require.Zero(t, undrawn, "every accepted registration is in the draw")
	require.Equal(t, 5, won)
	t.Logf("registrations: %d accepted, %d refused after the close; one draw", accepted.Load(), refused.Load())

	// Drawing again changes nothing.
	r, err := s.DrawLottery(ctx, sale.ID, nil)
	require.NoError(t, err)
	require.False(t, r.Drew)
	got, err := s.Sale(ctx, sale.ID)
	require.NoError(t, err)
	require.Equal(t, 5, got.Lottery.Counts.Won)
	require.Equal(t, total-5, got.Lottery.Counts.Waitlisted)
}
