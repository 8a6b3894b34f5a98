package jobs

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/flashline/flashline"
)

const beaconTimeout = 10 * time.Second

// Beacon reads rounds of a public randomness beacon in drand's HTTP format:
// GET URL/public/ROUND answers {"round", "randomness", "signature"} (hex),
// and 404 or 425 Too Early for a round not published yet.
type Beacon struct {
	URL    string
	Client *http.Client
}

// Round fetches round r and verifies it against the chain's public key
// (flashline.VerifyBeacon): a round that does not verify is an error, as one
// not had.
func (b Beacon) Round(ctx context.Context, publicKey []byte, r uint64) (flashline.BeaconRound, error) {
	if b.URL == "" {
		return flashline.BeaconRound{}, errors.New("no beacon is configured (--beacon-url)")
	}
	ctx, cancel := context.WithTimeout(ctx, beaconTimeout)
	defer cancel()
	u := strings.TrimRight(b.URL, "/") + "/public/" + strconv.FormatUint(r, 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return flashline.BeaconRound{}, err
	}
	resp, err := b.Client.Do(req)
	if err != nil {
		return flashline.BeaconRound{}, fmt.Errorf("beacon: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return flashline.BeaconRound{}, fmt.Errorf("beacon: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return flashline.BeaconRound{}, fmt.Errorf("beacon: round %d: %s", r, resp.Status)
	}
	var doc struct {
		Round      uint64 `json:"round"`
		Randomness string `json:"randomness"`
		Signature  string `json:"signature"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return flashline.BeaconRound{}, fmt.Errorf("beacon: round %d: %w", r, err)
	}
	if doc.Round != r {
		return flashline.BeaconRound{}, fmt.Errorf("beacon: asked round %d, answered round %d", r, doc.Round)
	}
	rand, err1 := hex.DecodeString(doc.Randomness)
	sig, err2 := hex.DecodeString(doc.Signature)
	if err := errors.Join(err1, err2); err != nil {
		return flashline.BeaconRound{}, fmt.Errorf("beacon: round %d: %w", r, err)
	}
	round := flashline.BeaconRound{Round: r, Randomness: rand, Signature: sig}
	if err := flashline.VerifyBeacon(publicKey, round); err != nil {
		return flashline.BeaconRound{}, err
	}
	return round, nil
}
