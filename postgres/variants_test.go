package postgres_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
)

// TestReceiptNamesTheVariant: in a sale with variants, the 201 receipt, its
// replays (purchase path and gate's), the reservation read back by id and
// as the customer's own, and the confirmed order all name the variant
// reserved; a sale without variants answers the bytes it did before.
func TestReceiptNamesTheVariant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t)
	sale, err := s.CreateSale(ctx, flashline.NewSale{SKU: "drop_49", PerCustomerLimit: 1, ReservationTTLSeconds: 600,
		Confirmation: flashline.ConfirmByCustomer,
		Variants:     []flashline.NewVariant{{SKU: "S", Stock: 2}, {SKU: "M.wide", Stock: 3, Buckets: 2}}})
	require.NoError(t, err)

	req := reserveReq(sale.ID, "alice", "k1", 1)
	req.Variant = "M.wide"
	req.Fingerprint = append(req.Fingerprint, "/M.wide"...)
	first, err := s.Reserve(ctx, req)
	require.NoError(t, err)
	var receipt flashline.Receipt
	require.NoError(t, json.Unmarshal(first.Receipt, &receipt))
	require.Equal(t, "M.wide", receipt.Variant, "%s", first.Receipt)
	require.Equal(t, "M.wide", first.Reservation.Variant)
	requireReplays(t, s, req, first.Receipt)

	alice := flashline.Actor{CustomerID: "alice"}
	got, err := s.Reservation(ctx, receipt.ReservationID, alice)
	require.NoError(t, err)
	require.Equal(t, "M.wide", got.Variant)
	own, err := s.CustomerReservation(ctx, sale.ID, alice)
	require.NoError(t, err)
	require.Equal(t, "M.wide", own.Variant)
	order, err := s.Confirm(ctx, receipt.ReservationID, alice)
	require.NoError(t, err)
	require.Equal(t, flashline.ReservationConfirmed, order.State)
	require.Equal(t, "M.wide", order.Variant)

	// The first variant's buckets are 0.., the second's 64..: bob's S must
	// not be read as M.wide (bucket / 64 names the position).
	bobReq := reserveReq(sale.ID, "bob", "k1", 1)
	bobReq.Variant = "S"
	bob, err := s.Reserve(ctx, bobReq)
	require.NoError(t, err)
	require.Contains(t, string(bob.Receipt), `"variant":"S"`)
	bobs, err := s.CustomerReservation(ctx, sale.ID, flashline.Actor{CustomerID: "bob"})
	require.NoError(t, err)
	require.Equal(t, "S", bobs.Variant)

	plain := createSale(t, s, 2, 1)
	res, err := s.Reserve(ctx, reserveReq(plain.ID, "alice", "k2", 1))
	require.NoError(t, err)
	require.NotContains(t, string(res.Receipt), "variant")
	var r flashline.Receipt
	require.NoError(t, json.Unmarshal(res.Receipt, &r))
	held, err := s.Reservation(ctx, r.ReservationID, alice)
	require.NoError(t, err)
	require.Empty(t, held.Variant)
	require.NotContains(t, string(flashline.NewReceipt(held).Bytes()), "variant")
}

// TestReserveHoldsTheAdmissionToItsVariant: a reservation whose admission
// names a won variant (AdmissionVariant) is refused another variant by the
// purchase path itself (ErrVariantNotWon), whoever calls Reserve, and
// nothing is held; the variant won is sold.
func TestReserveHoldsTheAdmissionToItsVariant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t)
	sale, err := s.CreateSale(ctx, flashline.NewSale{SKU: "drop_50", PerCustomerLimit: 1, ReservationTTLSeconds: 600,
		Confirmation: flashline.ConfirmByCustomer,
		Variants:     []flashline.NewVariant{{SKU: "S", Stock: 2}, {SKU: "M", Stock: 2}}})
	require.NoError(t, err)

	req := reserveReq(sale.ID, "alice", "k1", 1)
	req.Variant, req.AdmissionVariant = "S", "M"
	req.Fingerprint = append(req.Fingerprint, "/S"...)
	_, err = s.Reserve(ctx, req)
	require.ErrorIs(t, err, flashline.ErrVariantNotWon)
	_, err = s.CustomerReservation(ctx, sale.ID, flashline.Actor{CustomerID: "alice"})
	require.ErrorIs(t, err, flashline.ErrNotFound)

	req = reserveReq(sale.ID, "alice", "k2", 1)
	req.Variant, req.AdmissionVariant = "M", "M"
	req.Fingerprint = append(req.Fingerprint, "/M"...)
	res, err := s.Reserve(ctx, req)
	require.NoError(t, err)
	require.Equal(t, "M", res.Reservation.Variant)
}
