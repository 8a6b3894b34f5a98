package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/postgres"
)

func reservationID(t *testing.T, res flashline.ReserveResult) string {
	t.Helper()
	var v struct{ ReservationID string }
	require.NoError(t, json.Unmarshal(res.Receipt, &v))
	return v.ReservationID
}

func TestAdmissionTokensAreSingleUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t)
	sale, err := s.CreateSale(ctx, flashline.NewSale{SKU: "sku_adm", InitialStock: 5, PerCustomerLimit: 1,
		ReservationTTLSeconds: 600, Admission: flashline.AdmissionWaitingRoom})
	require.NoError(t, err)
	_, err = s.SetSaleState(ctx, sale.ID, flashline.ActionOpen)
	require.NoError(t, err)

	req := func(customer, key, token, id string) flashline.ReserveRequest {
		r := reserveReq(sale.ID, customer, key, 1)
		r.AdmissionToken, r.AdmissionID = token, id
		return r
	}
	_, err = s.Reserve(ctx, req("ann", "k1", "", ""))
	require.ErrorIs(t, err, flashline.ErrAdmissionRequired)
	_, err = s.Reserve(ctx, req("ann", "k1", "forged", ""))
	require.ErrorIs(t, err, flashline.ErrAdmissionInvalid)

	first, err := s.Reserve(ctx, req("ann", "k1", "tok", "adm-ann"))
	require.NoError(t, err)
	// The same request again replays, even with no token at all.
	again, err := s.Reserve(ctx, req("ann", "k1", "", ""))
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, first.Receipt, again.Receipt)

	// Used: not again, even after the reservation is cancelled, and not by
	// someone else.
	_, err = s.Cancel(ctx, reservationID(t, first), flashline.Actor{CustomerID: "ann"})
	require.NoError(t, err)
	_, err = s.Reserve(ctx, req("ann", "k2", "tok", "adm-ann"))
	require.ErrorIs(t, err, flashline.ErrAdmissionInvalid)
	_, err = s.Reserve(ctx, req("bea", "k1", "tok", "adm-ann"))
	require.ErrorIs(t, err, flashline.ErrAdmissionInvalid)
	requireInvariant(t, s, sale.ID)
}

func TestPerInstrumentLimitAndAccountAge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	stores := []*postgres.Store{postgres.NewStore(postgres.SinglePool(pool), postgres.Options{}), postgres.NewStore(postgres.SinglePool(pool), postgres.Options{})}
	sale, err := stores[0].CreateSale(ctx, flashline.NewSale{SKU: "sku_card", InitialStock: 50, PerCustomerLimit: 1,
		ReservationTTLSeconds: 600, PerInstrumentLimit: 3, MinAccountAgeSeconds: 3600})
	require.NoError(t, err)
	old := time.Now().Add(-2 * time.Hour)
	req := func(customer, instrument string, created time.Time) flashline.ReserveRequest {
		r := reserveReq(sale.ID, customer, "k", 1)
		r.PaymentInstrument, r.AccountCreated = instrument, created
		return r
	}

	t.Run("AccountAge", func(t *testing.T) {
		_, err := stores[0].Reserve(ctx, req("newbie", "card-x", time.Time{}))
		require.ErrorIs(t, err, flashline.ErrAccountTooNew)
		_, err = stores[0].Reserve(ctx, req("newbie", "card-x", time.Now().Add(-time.Minute)))
		require.ErrorIs(t, err, flashline.ErrAccountTooNew)
	})
	t.Run("NoInstrumentNamed", func(t *testing.T) {
		// A customer token that names no instrument: taken, and the
		// payment is counted on the instrument its provider reports.
		_, err := stores[0].Reserve(ctx, req("nocard", "", old))
		require.NoError(t, err)
	})
	t.Run("ConcurrentSameCard", func(t *testing.T) {
		// 20 customers, one card, two instances at once: exactly 3 units.
		var ok, limited atomic.Int64
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				for {
					_, err := stores[i%2].Reserve(ctx, req(fmt.Sprintf("card-holder-%d", i), "card-shared", old))
					switch {
					case errors.Is(err, flashline.ErrRequestInProgress):
						continue
					case err == nil:
						ok.Add(1)
					case errors.Is(err, flashline.ErrInstrumentLimitReached):
						limited.Add(1)
					default:
						t.Errorf("customer %d: %v", i, err)
					}
					return
				}
			})
		}
		wg.Wait()
		require.EqualValues(t, 3, ok.Load())
		require.EqualValues(t, 17, limited.Load())
	})
	t.Run("CancelFreesTheCard", func(t *testing.T) {
		r, err := stores[0].Reserve(ctx, req("solo-1", "card-solo", old))
		require.NoError(t, err)
		for i := 2; i <= 3; i++ {
			_, err := stores[0].Reserve(ctx, req(fmt.Sprintf("solo-%d", i), "card-solo", old))
			require.NoError(t, err)
		}
		_, err = stores[0].Reserve(ctx, req("solo-4", "card-solo", old))
		require.ErrorIs(t, err, flashline.ErrInstrumentLimitReached)
		_, err = stores[0].Cancel(ctx, reservationID(t, r), flashline.Actor{CustomerID: "solo-1"})
		require.NoError(t, err)
		_, err = stores[0].Reserve(ctx, req("solo-4", "card-solo", old))
		require.NoError(t, err)
	})
	requireInvariant(t, stores[0], sale.ID)
}
