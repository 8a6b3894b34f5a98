package handlers_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/waitroom/roomtoken"
)

// TestAdmissionTokens: the purchase endpoint of a waiting-room sale cannot be
// called without a valid admission token of this customer and sale, and a
// token buys once.
func TestAdmissionTokens(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	keys := roomtoken.DeriveKeyring(jwtSecret)
	newRoomSale := func() string {
		sale := s.createSale(t, `{"sku":"sku_room","initialStock":10,"admission":"waiting_room"}`)
		requireSale(t, s.do(t, http.MethodPost, "/admin/sales/"+sale.SaleID+"/open", adminAuth, ""), 200)
		return sale.SaleID
	}
	saleA, saleB := newRoomSale(), newRoomSale()
	admission := func(id, saleID, customerID string, ttl time.Duration) string {
		return keys.SignAdmission(roomtoken.Admission{ID: id, SaleID: saleID, CustomerID: customerID, ExpiresAt: time.Now().Add(ttl)})
	}
	reserve := func(saleID, who, key, token string) reply {
		return s.do(t, http.MethodPost, "/sales/"+saleID+"/reservations", customer(t, who), `{"quantity":1}`,
			"Idempotency-Key", key, "X-Admission-Token", token)
	}

	aliceA := admission("adm-alice-a", saleA, "alice", 2*time.Minute)
	requireError(t, s.reserve(t, saleA, customer(t, "alice"), "k0", `{"quantity":1}`), 403, "admission_required")
	requireError(t, reserve(saleA, "bob", "k1", aliceA), 403, "admission_invalid")                                               // another customer
	requireError(t, reserve(saleB, "alice", "k1", aliceA), 403, "admission_invalid")                                             // another sale
	requireError(t, reserve(saleA, "alice", "k1", admission("adm-old", saleA, "alice", -time.Second)), 403, "admission_invalid") // expired
	tampered := []byte(aliceA)
	tampered[len(tampered)/2] ^= 1
	requireError(t, reserve(saleA, "alice", "k1", string(tampered)), 403, "admission_invalid")
	ticket := keys.SignTicket(roomtoken.Ticket{SaleID: saleA, CustomerID: "alice", ArrivedAt: time.Now(), Position: 1})
	requireError(t, reserve(saleA, "alice", "k1", ticket), 403, "admission_invalid") // a ticket is not an admission

	first := reserve(saleA, "alice", "k1", aliceA)
	require.Equal(t, http.StatusCreated, first.Status, "%s", first.Body)
	again := reserve(saleA, "alice", "k1", aliceA) // the same request: replayed
	require.Equal(t, http.StatusCreated, again.Status)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.Equal(t, first.Body, again.Body)

	// Used once: not again, not even after the hold is cancelled.
	var held struct{ ReservationID string }
	require.NoError(t, json.Unmarshal(first.Body, &held))
	require.Equal(t, http.StatusOK, s.do(t, http.MethodPost, "/reservations/"+held.ReservationID+"/cancel", customer(t, "alice"), "").Status)
	requireError(t, reserve(saleA, "alice", "k2", aliceA), 403, "admission_invalid")
	// A new admission buys again.
	require.Equal(t, http.StatusCreated, reserve(saleA, "alice", "k3", admission("adm-alice-a2", saleA, "alice", time.Minute)).Status)
	require.Equal(t, 9, s.sale(t, saleA).Available)
}
