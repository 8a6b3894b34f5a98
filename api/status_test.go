package api_test

import (
	"encoding/json"
	"math/rand/v2"
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
