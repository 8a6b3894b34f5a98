package testbeacon

import (
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashline/flashline"
)

// Beacon is a running test beacon.
type Beacon struct {
	URL    string
	Chain  flashline.BeaconChain
	Signer *flashline.BeaconSigner

	mu       sync.Mutex
	released uint64
	asked    map[uint64]int
}

// Start starts a beacon whose chain began at genesis with period, its key
// derived from name; closed when the test ends.
func Start(t testing.TB, name string, genesis time.Time, period time.Duration) *Beacon {
	t.Helper()
	signer, err := flashline.NewBeaconSigner([]byte("testbeacon key material for " + name + " ................................"))
	if err != nil {
		t.Fatal(err)
	}
	b := &Beacon{Signer: signer, asked: map[uint64]int{},
		Chain: flashline.BeaconChain{PublicKey: signer.PublicKey(), Genesis: genesis, Period: period}}
	srv := httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(srv.Close)
	b.URL = srv.URL
	return b
}

// Release publishes every round up to r.
func (b *Beacon) Release(r uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.released = max(b.released, r)
}

// Asked is how many times round r was asked for.
func (b *Beacon) Asked(r uint64) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.asked[r]
}

func (b *Beacon) serve(w http.ResponseWriter, req *http.Request) {
	s, ok := strings.CutPrefix(req.URL.Path, "/public/")
	r, err := strconv.ParseUint(s, 10, 64)
	if !ok || err != nil || r == 0 {
		http.NotFound(w, req)
		return
	}
	b.mu.Lock()
	b.asked[r]++
	released := r <= b.released
	b.mu.Unlock()
	if !released {
		http.Error(w, "round not published yet", http.StatusTooEarly)
		return
	}
	round := b.Signer.Round(r)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"round": r, "randomness": hex.EncodeToString(round.Randomness), "signature": hex.EncodeToString(round.Signature),
	})
}

// Client is an HTTP client for the beacon.
func (b *Beacon) Client() *http.Client { return &http.Client{Timeout: 10 * time.Second} }
