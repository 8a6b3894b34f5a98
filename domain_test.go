package flashline_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
)

func TestValidID(t *testing.T) {
	t.Parallel()
	made := flashline.NewID(flashline.SaleIDPrefix)
	require.True(t, flashline.ValidID(flashline.SaleIDPrefix, made), made)
	require.False(t, flashline.ValidID(flashline.ReservationIDPrefix, made), "another kind's prefix")
	for _, id := range []string{
		"", "sale_", "sale_doesnotexist", "sale-01J9Z3Q8K7M5T6V2W4X8Y0Z1A2",
		"sale_01J9Z3Q8K7M5T6V2W4X8Y0Z1A",   // 25 characters
		"sale_01J9Z3Q8K7M5T6V2W4X8Y0Z1A23", // 27
		"sale_01j9z3q8k7m5t6v2w4x8y0z1a2",  // lower case
		"sale_01J9Z3Q8K7M5T6V2W4X8Y0Z1AU",  // U is not Crockford
		"sale_81J9Z3Q8K7M5T6V2W4X8Y0Z1A2",  // above the largest ULID
		"sale_01J9Z3Q8K7M5T6V2W4X8Y0Z1A\x00",
		"sale_" + strings.Repeat("0", 512<<10),
	} {
		require.False(t, flashline.ValidID(flashline.SaleIDPrefix, id), "%.40q", id)
	}
	require.True(t, flashline.ValidID(flashline.SaleIDPrefix, "sale_7ZZZZZZZZZZZZZZZZZZZZZZZZZ"))
}

func TestValidText(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "sku_991", "Baskets – été", "日本語", "a b"} {
		require.True(t, flashline.ValidText(s), "%q", s)
	}
	for _, s := range []string{"\x00", "a\x00b", "\x1b[2J", "tab\there", "line\n", "\x7f", "\u0085",
		"zero\u200bwidth", "joiner\u200d", "\u202eevil", "\ufeffbom", "\xff", "a\xc3"} {
		require.False(t, flashline.ValidText(s), "%q", s)
	}
}

func TestNormalizeInstrument(t *testing.T) {
	t.Parallel()
	// Every spelling of one card is one instrument.
	for _, s := range []string{"card-1", "CARD-1", " card-1", "card-1  ", "Card-1", "ｃａｒｄ－１", "ＣＡＲＤ－１"} {
		got, err := flashline.NormalizeInstrument(s)
		require.NoError(t, err, "%q", s)
		require.Equal(t, "card-1", got, "%q", s)
	}
	got, err := flashline.NormalizeInstrument("")
	require.NoError(t, err)
	require.Empty(t, got, "no instrument stays none")
	got, err = flashline.NormalizeInstrument("Straße")
	require.NoError(t, err)
	require.Equal(t, "strasse", got, "full case folding")
	// Cherokee folds to its capitals, whichever case comes, and stays so.
	for _, s := range []string{"\u13cf\u13f0", "\uab9f\u13f8", "\u13cf\u13f8"} {
		got, err = flashline.NormalizeInstrument(s)
		require.NoError(t, err)
		require.Equal(t, "\u13cf\u13f0", got, "%+q", s)
	}

	for _, s := range []string{"card\u200b-1", "card-1\u200d", "\u2060card-1", "card\x00-1", "card\t1", "\u202ecard", "   ",
		strings.Repeat("x", flashline.MaxInstrumentLen+1)} {
		_, err := flashline.NormalizeInstrument(s)
		var invalid *flashline.InvalidError
		require.ErrorAs(t, err, &invalid, "%.40q", s)
	}
}

// FuzzNormalizeInstrument: whatever arrives, a fingerprint is refused or
// comes back as clean text within the limit, and normalising it again
// changes nothing (one instrument, one spelling).
func FuzzNormalizeInstrument(f *testing.F) {
	for _, s := range []string{"card-1", "CARD-1", " card-1", "ｃａｒｄ－１", "card\u200b-1", "\x00", "Straße", "ﬀ", "ǅ", "\u0345", "İ", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := flashline.NormalizeInstrument(s)
		if err != nil {
			return
		}
		if s != "" && (got == "" || len(got) > flashline.MaxInstrumentLen || !utf8.ValidString(got) || !flashline.ValidText(got)) {
			t.Fatalf("NormalizeInstrument(%q) = %q", s, got)
		}
		again, err := flashline.NormalizeInstrument(got)
		if err != nil || again != got {
			t.Fatalf("NormalizeInstrument(%q) = %q, again %q, %v", s, got, again, err)
		}
	})
}

// FuzzValidID: an id passes only in the exact shape NewID makes.
func FuzzValidID(f *testing.F) {
	f.Add(flashline.NewID(flashline.SaleIDPrefix))
	f.Add("sale_doesnotexist")
	f.Add("sale_00000000000000000000000000")
	f.Fuzz(func(t *testing.T, id string) {
		if !flashline.ValidID(flashline.SaleIDPrefix, id) {
			return
		}
		if len(id) != 31 || !strings.HasPrefix(id, "sale_") || id[5] > '7' ||
			strings.Trim(id[5:], "0123456789ABCDEFGHJKMNPQRSTVWXYZ") != "" {
			t.Fatalf("ValidID accepted %q", id)
		}
	})
}

func TestNewSaleConfirmation(t *testing.T) {
	t.Parallel()
	n := flashline.NewSale{SKU: "sku", InitialStock: 1}
	require.NoError(t, n.Validate())
	require.Equal(t, flashline.ConfirmByPayment, n.Confirmation, "a purchase reserves stock; payment confirms it")
	n = flashline.NewSale{SKU: "sku", InitialStock: 1, Confirmation: flashline.ConfirmByCustomer}
	require.NoError(t, n.Validate())
	n.Confirmation = "cash"
	var invalid *flashline.InvalidError
	require.ErrorAs(t, n.Validate(), &invalid)
}

func TestPaymentEventValidate(t *testing.T) {
	t.Parallel()
	res := flashline.NewID(flashline.ReservationIDPrefix)
	amount, negative, huge := int64(100), int64(-1), int64(flashline.MaxPaymentAmount+1)
	ok := flashline.PaymentEvent{ID: "evt_1", Type: flashline.PaymentSucceeded, ReservationID: res, PaymentReference: "pi_1", Amount: &amount, Currency: "eur"}
	require.NoError(t, ok.Validate())
	failed := flashline.PaymentEvent{ID: "evt_2", Type: flashline.PaymentFailed, ReservationID: res, Reason: "card declined"}
	require.NoError(t, failed.Validate(), "a failure needs no payment reference")

	for name, mutate := range map[string]func(*flashline.PaymentEvent){
		"NoID":             func(e *flashline.PaymentEvent) { e.ID = "" },
		"LongID":           func(e *flashline.PaymentEvent) { e.ID = strings.Repeat("e", 256) },
		"IDWithSpace":      func(e *flashline.PaymentEvent) { e.ID = "evt 1" },
		"IDNotASCII":       func(e *flashline.PaymentEvent) { e.ID = "évt" },
		"UnknownType":      func(e *flashline.PaymentEvent) { e.Type = "charge.refunded" },
		"NoReservation":    func(e *flashline.PaymentEvent) { e.ReservationID = "" },
		"NoReference":      func(e *flashline.PaymentEvent) { e.PaymentReference = "" },
		"LongReference":    func(e *flashline.PaymentEvent) { e.PaymentReference = strings.Repeat("p", 256) },
		"ReferenceControl": func(e *flashline.PaymentEvent) { e.PaymentReference = "pi\x00" },
		"NegativeAmount":   func(e *flashline.PaymentEvent) { e.Amount = &negative },
		"HugeAmount":       func(e *flashline.PaymentEvent) { e.Amount = &huge },
		"Currency4":        func(e *flashline.PaymentEvent) { e.Currency = "EURO" },
		"CurrencyDigits":   func(e *flashline.PaymentEvent) { e.Currency = "E1R" },
		"ReasonControl":    func(e *flashline.PaymentEvent) { e.Reason = "a\u200bb" },
	} {
		e := ok
		mutate(&e)
		var invalid *flashline.InvalidError
		require.ErrorAs(t, e.Validate(), &invalid, name)
	}
	e := ok
	e.ReservationID = "res_nope"
	require.ErrorIs(t, e.Validate(), flashline.ErrUnknownReservation, "an id the service never makes names nothing")
}
