package api_test

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/flashline/flashline/api"
)

func TestStatusJSONAsReflection(t *testing.T) {
	strs := []string{"", "waiting", "admitted", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjIn0.c2ln-_x", "sold out <soon>", "1 < 2", "3 > 2", "this & that", "say \"then\"", "back\\slash",
		"caf\u00e9 \u2028 line", "tab\there\nnew", "\xff\xfe invalid", "plain message, 280 bytes at most"}
	num := func(r *rand.Rand) *int64 {
		if r.IntN(3) == 0 {
			return nil
		}
		v := r.Int64N(1<<40) - 1<<20
		return &v
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		s := api.Status{State: strs[r.IntN(len(strs))], Position: num(r), EstimatedWaitSeconds: num(r), PollAfterMs: num(r),
			ExpiresIn: num(r), Paused: r.IntN(2) == 0, Held: r.IntN(2) == 0, Stale: r.IntN(2) == 0,
			Message: strs[r.IntN(len(strs))], AdmissionToken: strs[r.IntN(len(strs))]}
		if r.IntN(2) == 0 {
			s.PositionRange = &api.PositionRange{P25: r.Int64N(1000), P75: r.Int64N(1000)}
		}
		if r.IntN(2) == 0 {
			s.Challenge = &api.Challenge{Nonce: strs[r.IntN(len(strs))], Bits: r.IntN(30)}
		}
		if r.IntN(3) > 0 {
			full := r.IntN(2) == 0
			s.QueueIsFull = &full
		}
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.AppendJSON(nil); string(got) != string(want) {
			t.Fatalf("case %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// TestStatusJSONHasEveryField sets every field of api.Status, whatever it
// is, so that a field added to the struct and not to AppendJSON fails here
// (the random answers above set only the fields known when they were
// written).
func TestStatusJSONHasEveryField(t *testing.T) {
	var s api.Status
	fill(t, reflect.ValueOf(&s).Elem())
	want, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.AppendJSON(nil); string(got) != string(want) {
		t.Fatalf("every field set:\n got %s\nwant %s", got, want)
	}
}

// fill sets v, and every field of v, to a value other than its zero.
func fill(t *testing.T, v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			fill(t, v.Field(i))
		}
	case reflect.Slice: // two elements, so that the separator is written too
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		fill(t, v.Index(0))
		fill(t, v.Index(1))
	default:
		t.Fatalf("fill: a field of kind %s: teach fill (and AppendJSON) about it", v.Kind())
	}
}

func TestTicketJSONAsReflection(t *testing.T) {
	strs := []string{"", "randomized_at_open", "arrival_order", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjIn0.c2ln-_x", "1 < 2", "this & that",
		"say \"then\"", "back\\slash", "caf\u00e9 \u2028 line", "tab\there\nnew", "\xff\xfe invalid"}
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 2000 {
		tk := api.Ticket{Token: strs[r.IntN(len(strs))], Position: r.Int64N(1<<40) - 1<<20, EstimatedWaitSeconds: r.Int64N(1 << 20),
			PollAfterMs: r.Int64N(1<<20) - 10, Policy: strs[r.IntN(len(strs))]}
		if r.IntN(2) == 0 {
			tk.PositionRange = &api.PositionRange{P25: r.Int64N(1000), P75: r.Int64N(1000)}
		}
		if r.IntN(2) == 0 {
			tk.Challenge = &api.Challenge{Nonce: strs[r.IntN(len(strs))], Bits: r.IntN(30)}
		}
		want, err := json.Marshal(tk)
		if err != nil {
			t.Fatal(err)
		}
		if got := tk.AppendJSON(nil); string(got) != string(want) {
			t.Fatalf("case %d:\n got %s\nwant %s", i, got, want)
		}
	}
	// Every field set, so that a field added to the struct and not to
	// AppendJSON fails here.
	var tk api.Ticket
	fill(t, reflect.ValueOf(&tk).Elem())
	want, err := json.Marshal(tk)
	if err != nil {
		t.Fatal(err)
	}
	if got := tk.AppendJSON(nil); string(got) != string(want) {
		t.Fatalf("every field set:\n got %s\nwant %s", got, want)
	}
}

// BenchmarkTicketJSON is the edge's new ticket's JSON (a token of about 400
// bytes, the longest string the doors write).
func BenchmarkTicketJSON(b *testing.B) {
	token := "eyJhbGciOiJIUzI1NiIsImtpZCI6ImMxIiwidHlwIjoiSldUIn0." + strings.Repeat("eyJhdWQiOiJmbGFzaGxpbmUtdGlja2V0Iiwi", 8) + ".CrihFk25jHa1w91DOojc59XeLqGXDtZ7387t4cqGFeI"
	one := int64(1)
	tk := api.Ticket{Token: token, Position: 1, PositionRange: &api.PositionRange{P25: 1, P75: one}, EstimatedWaitSeconds: 3600,
		PollAfterMs: 901, Policy: "randomized_at_open"}
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = tk.AppendJSON(buf[:0])
	}
}
