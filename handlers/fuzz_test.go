package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/flashline/flashline"
)

// FuzzDecodeReserveBody: the reserve body parser never panics, refuses only
// with an *flashline.InvalidError (a 400, never a 500), and accepts only a
// single valid JSON object.
func FuzzDecodeReserveBody(f *testing.F) {
	for _, seed := range []string{
		`{"quantity":1}`,
		`{"quantity":2,"paymentInstrument":"card_abc"}`,
		`{}`,
		` {"quantity":1} `,
		``,
		` `,
		`{`,
		`}`,
		`[]`,
		`"x"`,
		`1`,
		`{"quantity":0}`,
		`{"quantity":-1}`,
		`{"quantity":1.5}`,
		`{"quantity":"1"}`,
		`{"quantity":1e3}`,
		`{"quantity":99999999999999999999}`,
		`{"quantity":1,"colour":"red"}`,
		`{"quantity":1} x`,
		`{"quantity":1}{"quantity":1}`,
		`{"quantity":1}]`,
		`{"quantity":1,"quantity":2}`,
		`{"Quantity":1}`,
		`{"paymentInstrument":"\u0000\ud800"}`,
		"{\"quantity\":1}\x00",
		"\xef\xbb\xbf{\"quantity\":1}",
		`{"quantity":[1]}`,
		`{"quantity":{"n":1}}`,
		`{"paymentInstrument":null,"quantity":null}`,
		strings.Repeat("[", MaxBodyBytes),
		strings.Repeat(`{"a":`, MaxBodyBytes/5),
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > MaxBodyBytes {
			// decodeJSON refuses a longer body before it gets here.
			return
		}
		var req reserveRequest
		err := decodeBytes(body, &req)
		if err != nil {
			var invalid *flashline.InvalidError
			if !errors.As(err, &invalid) {
				t.Fatalf("decodeBytes(%q) = %T %v, want *flashline.InvalidError", body, err, err)
			}
			if invalid.Reason == "" {
				t.Fatalf("decodeBytes(%q): InvalidError without a reason", body)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("decodeBytes accepted invalid JSON %q", body)
		}
		trimmed := bytes.TrimSpace(body)
		if len(trimmed) == 0 || trimmed[0] != '{' {
			t.Fatalf("decodeBytes accepted %q, which is not a JSON object", body)
		}
	})
}

// printableASCII is the contract's Idempotency-Key, said as a regular
// expression rather than a loop.
var printableASCII = regexp.MustCompile(`^[\x20-\x7e]{1,255}$`)

// FuzzIdempotencyKey: validIdempotencyKey is true exactly for 1-255 bytes of
// printable ASCII (0x20-0x7e).
func FuzzIdempotencyKey(f *testing.F) {
	for _, seed := range []string{
		"", "k", " ", "~", "order-123", "a\tb", "a\x00b", "a\x7fb", "a\x1fb", "clé",
		"\xff", "\x80", strings.Repeat("k", 255), strings.Repeat("k", 256), strings.Repeat("é", 100),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, key string) {
		want := printableASCII.MatchString(key)
		if got := validIdempotencyKey(key); got != want {
			t.Fatalf("validIdempotencyKey(%q) = %v, want %v", key, got, want)
		}
	})
}

// FuzzDecodeCreateSale: the admin's sale body never panics, is refused only
// with an *flashline.InvalidError, and a sale it accepts is one the store
// can write: its sku is clean text within bounds, every number in range.
func FuzzDecodeCreateSale(f *testing.F) {
	for _, seed := range []string{
		`{"sku":"sku_1","initialStock":200}`,
		`{"sku":"sku_1","initialStock":200,"perCustomerLimit":2,"reservationTtlSeconds":60,"opensAt":"2030-01-01T00:00:00Z","admission":"waiting_room","buckets":4,"fairness":"arrival_order","challengeBits":8,"perInstrumentLimit":1,"minAccountAgeSeconds":86400}`,
		`{"sku":"a\u0000b","initialStock":1}`,
		`{"sku":"a\u200bb","initialStock":1}`,
		`{"sku":"","initialStock":1}`,
		`{"sku":"x","initialStock":0}`,
		`{"sku":"x","initialStock":1,"buckets":2}`,
		`{"sku":"x","initialStock":1,"opensAt":"yesterday"}`,
		`{"sku":"x","initialStock":1,"perInstrumentLimit":0}`,
		`{"sku":"x"}`,
		`{"sku":"x","initialStock":3,"admission":"lottery","registrationOpensAt":"2030-01-01T00:00:00Z","registrationClosesAt":"2030-01-02T00:00:00Z","drawAt":"2030-01-02T00:00:00Z","purchaseWindowSeconds":600,"waitlist":true}`,
		`{"sku":"x","initialStock":3,"admission":"lottery","registrationOpensAt":"2030-01-03T00:00:00Z","registrationClosesAt":"2030-01-02T00:00:00Z","drawAt":"2030-01-01T00:00:00Z","purchaseWindowSeconds":0}`,
		`{"sku":"x","initialStock":3,"waitlist":false}`,
		`{"sku":"x","initialStock":1,"title":"Trail runner — édition","imageUrl":"https://img.example/a.png?w=1"}`,
		`{"sku":"x","initialStock":1,"title":"","imageUrl":"http://img.example/a.png"}`,
		`{"sku":"x","initialStock":1,"title":" ","imageUrl":"https://u@img.example/"}`,
		`{"sku":"x","initialStock":1,"imageUrl":"https:\\evil.example"}`,
		`{}`, `[]`, ``,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var req CreateSaleRequest
		err := decodeBytes([]byte(body), &req)
		var n flashline.NewSale
		if err == nil {
			n, err = req.NewSale()
		}
		if err != nil {
			var invalid *flashline.InvalidError
			if !errors.As(err, &invalid) {
				t.Fatalf("%q: refused with %T %v, want *flashline.InvalidError", body, err, err)
			}
			return
		}
		switch {
		case n.SKU == "" || len(n.SKU) > flashline.MaxSKULength || !flashline.ValidText(n.SKU):
			t.Fatalf("%q: accepted sku %q", body, n.SKU)
		case n.Title != "" && (utf8.RuneCountInString(n.Title) > flashline.MaxTitleLength || !flashline.ValidText(n.Title) || strings.TrimSpace(n.Title) == ""):
			t.Fatalf("%q: accepted title %q", body, n.Title)
		case n.ImageURL != "" && !validImageURL(n.ImageURL):
			t.Fatalf("%q: accepted imageUrl %q", body, n.ImageURL)
		case n.InitialStock < 1 || n.Buckets < 1 || n.Buckets > n.InitialStock || n.PerCustomerLimit < 1:
			t.Fatalf("%q: accepted %+v", body, n)
		case (n.Admission == flashline.AdmissionLottery) != (n.Lottery != nil):
			t.Fatalf("%q: accepted lottery rules %+v with admission %q", body, n.Lottery, n.Admission)
		case n.Lottery != nil && (!n.Lottery.RegistrationOpensAt.Before(n.Lottery.RegistrationClosesAt) ||
			n.Lottery.DrawAt.Before(n.Lottery.RegistrationClosesAt) || n.Lottery.PurchaseWindowSeconds < 1 ||
			n.PerCustomerLimit != 1 || n.OpensAt == nil || !n.OpensAt.Equal(n.Lottery.DrawAt)):
			t.Fatalf("%q: accepted lottery %+v", body, n)
		}
	})
}

// FuzzParsePaymentEvent: an authenticated payment event's body never panics
// the parser, is refused only as a 400 (an *flashline.InvalidError) or a 422
// (a reservation id the service never makes), and an accepted one has every
// field a valid event needs.
func FuzzParsePaymentEvent(f *testing.F) {
	for _, seed := range []string{
		`{"id":"evt_1","type":"payment.succeeded","data":{"reservationId":"res_01ARZ3NDEKTSV4RRFFQ69G5FAV","paymentReference":"pi_1","amount":100,"currency":"EUR"}}`,
		`{"id":"evt_2","type":"payment.failed","data":{"reservationId":"res_01ARZ3NDEKTSV4RRFFQ69G5FAV","reason":"declined"}}`,
		`{"id":"evt_3","type":"refund.succeeded","data":{"reservationId":"res_01ARZ3NDEKTSV4RRFFQ69G5FAV","paymentReference":"pi_1"}}`,
		`{"id":"evt_4","type":"payment.succeeded","data":null}`,
		`{"id":"evt_5","type":"payment.succeeded","data":[]}`,
		`{"id":"evt_6","type":"payment.succeeded","data":{"reservationId":"res_x","paymentReference":"pi"}}`,
		`{"id":"","type":"","data":{}}`,
		`{"id":"evt_7","type":"payment.succeeded","data":{"amount":-1}}`,
		`{"id":"evt_8","type":"payment.succeeded","data":{"amount":1e40}}`,
		`{"id":"evt_9","type":"payment.succeeded","data":{"RESERVATIONID":"res_x"}}`,
		`{"id":"evt\u0000","type":"payment.succeeded","data":{}}`,
		`{"data":{"data":{"data":{}}}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > MaxPaymentEventBytes {
			return // readBody refuses a longer body before it gets here
		}
		ev, err := parsePaymentEvent(body)
		if err != nil {
			var invalid *flashline.InvalidError
			if !errors.As(err, &invalid) && !errors.Is(err, flashline.ErrUnknownReservation) {
				t.Fatalf("parsePaymentEvent(%q) = %v: neither a 400 nor a 422", body, err)
			}
			return
		}
		if ev.ID == "" || ev.ReservationID == "" || len(ev.Hash) != 32 ||
			!flashline.ValidID(flashline.ReservationIDPrefix, ev.ReservationID) {
			t.Fatalf("parsePaymentEvent(%q) accepted %+v", body, ev)
		}
		if ev.Type != flashline.PaymentFailed && ev.PaymentReference == "" {
			t.Fatalf("parsePaymentEvent(%q) accepted %s without a payment reference", body, ev.Type)
		}
	})
}

// validImageURL is the oracle for an accepted image URL: what the page may
// put in an img src, and the database's constraint takes.
func validImageURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil || !strings.HasPrefix(s, "https://") || len(s) > flashline.MaxImageURLLength || u.Host == "" || u.User != nil {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f || s[i] == '\\' {
			return false
		}
	}
	return true
}
