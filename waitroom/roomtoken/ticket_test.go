package roomtoken

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// worst is an id of MaxIDLen bytes that JSON escapes to twice its length.
var worst = strings.Repeat(`"`, MaxIDLen)

// worstRunes is an id of MaxIDLen bytes of U+2028, which JSON also escapes.
var worstRunes = strings.Repeat("\u2028", MaxIDLen/3) + "xx"

func TestTicketRoundTrip(t *testing.T) {
	t.Parallel()
	ring := testRing(t, "k1:"+secret1)
	tests := []struct {
		name string
		in   Ticket
		want Ticket // zero means in
	}{
		{"Plain", goldenTicket(), Ticket{}},
		{"PreOpenWithDraw", Ticket{SaleID: "01JH0000000000000000000000", CustomerID: "c", ArrivedAt: t0, Position: 1, PreOpen: true, Draw: math.MaxUint64}, Ticket{}},
		{"LargestPosition", Ticket{SaleID: "s", CustomerID: "c", ArrivedAt: t0, Position: math.MaxInt64}, Ticket{}},
		{"NotASCII", Ticket{SaleID: "vente-été", CustomerID: "客户 🛒 <&>", ArrivedAt: t0, Position: 3}, Ticket{}},
		{"QuotesAndBackslashes", Ticket{SaleID: `s"\`, CustomerID: `\"\u0000`, ArrivedAt: t0, Position: 3}, Ticket{}},
		{"EarliestTime", Ticket{SaleID: "s", CustomerID: "c", ArrivedAt: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), Position: 1}, Ticket{}},
		{"LatestTime", Ticket{SaleID: "s", CustomerID: "c", ArrivedAt: time.Date(2200, 12, 31, 23, 59, 59, 0, time.UTC), Position: 1}, Ticket{}},
		{"LongestWorstIDs", Ticket{SaleID: worst, CustomerID: worst, ArrivedAt: time.Date(2200, 12, 31, 23, 59, 59, 0, time.UTC), Position: math.MaxInt64, PreOpen: true, Draw: math.MaxUint64}, Ticket{}},
		{"LongestWorstRunes", Ticket{SaleID: worstRunes, CustomerID: worstRunes, ArrivedAt: t0, Position: math.MaxInt64, Draw: math.MaxUint64}, Ticket{}},
		{
			"KeptToTheSecond",
			Ticket{SaleID: "s", CustomerID: "c", ArrivedAt: t0.Add(999 * time.Millisecond), Position: 1},
			Ticket{SaleID: "s", CustomerID: "c", ArrivedAt: t0, Position: 1},
		},
		{
			"AnyZoneComesBackUTC",
			Ticket{SaleID: "s", CustomerID: "c", ArrivedAt: t0.In(time.FixedZone("X", 5*3600)), Position: 1},
			Ticket{SaleID: "s", CustomerID: "c", ArrivedAt: t0, Position: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want := tt.want
			if want == (Ticket{}) {
				want = tt.in
			}
			k := ring.at(tt.in.ArrivedAt) // not expired
			tok := k.SignTicket(tt.in)
			require.LessOrEqual(t, len(tok), MaxTokenLen)
			require.True(t, strings.HasPrefix(tok, goldenHeaderK1+"."), tok)
			got, err := k.ParseTicket(tok)
			require.NoError(t, err)
			require.Equal(t, want, got)
			require.Equal(t, tok, k.SignTicket(got), "a parsed ticket signs to the same token")
		})
	}
}

func TestTicketExpiry(t *testing.T) {
	t.Parallel()
	ring := testRing(t, "k1:"+secret1)
	tk := goldenTicket()
	tok := ring.SignTicket(tk)
	var claims struct{ Iat, Exp int64 }
	require.NoError(t, json.Unmarshal([]byte(segment(t, tok, 1)), &claims))
	require.Equal(t, tk.ArrivedAt.Unix(), claims.Iat, "iat is the arrival")
	require.Equal(t, tk.ArrivedAt.Add(TicketTTL).Unix(), claims.Exp, "exp is TicketTTL later")

	tests := []struct {
		name string
		now  time.Time
		want error // nil means accepted
	}{
		{"AtArrival", tk.ArrivedAt, nil},
		{"BeforeArrival", tk.ArrivedAt.Add(-time.Hour), nil}, // clocks differ: no "nbf"
		{"AnHourLater", tk.ArrivedAt.Add(time.Hour), nil},
		{"UntilTheLastInstant", tk.ArrivedAt.Add(TicketTTL - time.Nanosecond), nil},
		{"ExpiredAtExpiry", tk.ArrivedAt.Add(TicketTTL), ErrTicketExpired},
		{"ExpiredAfter", tk.ArrivedAt.Add(30 * 24 * time.Hour), ErrTicketExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ring.at(tt.now).ParseTicket(tok)
			if tt.want == nil {
				require.NoError(t, err)
				require.Equal(t, tk, got)
				return
			}
			requireSentinel(t, err, tt.want)
			require.ErrorContains(t, err, "parse ticket: ticket expired at 2026-01-02T00:00:00Z")
		})
	}

	t.Run("RealClock", func(t *testing.T) {
		t.Parallel()
		// Without a test clock, the keyring judges expiry by time.Now.
		k := DeriveKeyring("jwt-secret")
		fresh := Ticket{SaleID: "s", CustomerID: "c", ArrivedAt: time.Now().Add(-TicketTTL + time.Minute), Position: 1}
		_, err := k.ParseTicket(k.SignTicket(fresh))
		require.NoError(t, err)
		stale := fresh
		stale.ArrivedAt = time.Now().Add(-TicketTTL - time.Second)
		_, err = k.ParseTicket(k.SignTicket(stale))
		requireSentinel(t, err, ErrTicketExpired)
	})
}

func TestAdmissionID(t *testing.T) {
	t.Parallel()
	tk := goldenTicket()
	id := AdmissionID(tk)
	require.Equal(t, goldenAdmissionID, id)
	require.Len(t, id, 22)
	require.True(t, validAlphabet(id))

	t.Run("Stable", func(t *testing.T) {
		t.Parallel()
		for range 3 {
			require.Equal(t, id, AdmissionID(goldenTicket()))
		}
		sub := tk
		sub.ArrivedAt = tk.ArrivedAt.Add(500 * time.Millisecond)
		require.Equal(t, id, AdmissionID(sub), "kept to the second, as signed")
		parsed, err := testRing(t, "x:"+secret2).ParseTicket(testRing(t, "x:"+secret2).SignTicket(sub))
		require.NoError(t, err)
		require.Equal(t, id, AdmissionID(parsed), "the same after a round trip, whatever the key")
	})

	t.Run("EveryFieldCounts", func(t *testing.T) {
		t.Parallel()
		changes := map[string]func(*Ticket){
			"SaleID":     func(t *Ticket) { t.SaleID = "sale_2" },
			"CustomerID": func(t *Ticket) { t.CustomerID = "cust_2" },
			"ArrivedAt":  func(t *Ticket) { t.ArrivedAt = t.ArrivedAt.Add(time.Second) },
			"Position":   func(t *Ticket) { t.Position++ },
			"PreOpen":    func(t *Ticket) { t.PreOpen = true },
			"Draw":       func(t *Ticket) { t.Draw++ },
		}
		for name, change := range changes {
			other := goldenTicket()
			change(&other)
			require.NotEqual(t, id, AdmissionID(other), name)
		}
	})

	t.Run("FitsAnAdmission", func(t *testing.T) {
		t.Parallel()
		k := testRing(t, "k1:"+secret1)
		a := Admission{ID: id, SaleID: tk.SaleID, CustomerID: tk.CustomerID, ExpiresAt: t0}
		got, err := k.ParseAdmission(k.SignAdmission(a))
		require.NoError(t, err)
		require.Equal(t, id, got.ID)
	})
}

// TestTicketClaimsAsMarshal: a ticket's claims written by hand are the bytes
// marshal writes, for plain ids and for every kind of id that is not.
func TestTicketClaimsAsMarshal(t *testing.T) {
	t.Parallel()
	ids := []string{"sale_01M98BYEW9VE5Y9X8M48DE3MNA", "cust_1", "auth0|5f7c8ec7c33c6c004bbafe82", "a <b> & c", "x", worst, worstRunes,
		`back\slash`, "caf\u00e9", "line\u2029sep", "~!@#$%^*()_+{}:?`", strings.Repeat("z", MaxIDLen)}
	for i, sale := range ids {
		for j, customer := range ids {
			c := ticketClaims{Audience: ticketAudience, Subject: customer, IssuedAt: 1767225600 + int64(i), ExpiresAt: 1767312000 + int64(j),
				Sale: sale, Position: int64(i*j + 1), PreOpen: (i+j)%2 == 0, Draw: math.MaxUint64 - uint64(i*1000+j)}
			require.Equal(t, string(marshal(c)), string(c.appendJSON(nil)), "sale %q, customer %q", sale, customer)
		}
	}
}
