package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/api"
)

// drawnTranscript is a drawn lottery's transcript as the service renders
// it, its beacon a test's own.
func drawnTranscript(t *testing.T) (api.DrawTranscript, *flashline.BeaconSigner) {
	t.Helper()
	sale := flashline.NewID(flashline.SaleIDPrefix)
	signer, err := flashline.NewBeaconSigner([]byte("verify-draw's test beacon key material"))
	require.NoError(t, err)
	closes := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	chain := flashline.BeaconChain{PublicKey: signer.PublicKey(), Genesis: closes.Add(-time.Hour), Period: 3 * time.Second}
	round := signer.Round(chain.RoundAfter(closes))
	seed := []byte("0123456789abcdef")
	var customers []string
	rs := make([]flashline.Registrant, 8)
	for i := range rs {
		customers = append(customers, fmt.Sprint("cust_", i))
		rs[i] = flashline.RegistrantOf(sale, customers[i])
	}
	root := flashline.RegistrantsRoot(rs)
	order := flashline.LotteryOrderV2(sale, flashline.LotteryFinalSeed(sale, root, round.Randomness, seed), customers)
	entries := make([]flashline.LotteryEntry, len(order))
	for i, c := range order {
		entries[i] = flashline.LotteryEntry{CustomerID: c, Rank: i + 1}
	}
	drawn, committed := closes.Add(time.Minute), closes
	l := flashline.Lottery{SaleID: sale, InitialStock: 3, DrawSeed: seed, DrawnAt: &drawn, DrawVersion: 2,
		Rules:           flashline.LotteryRules{RegistrationClosesAt: closes, DrawAt: closes, Waitlist: true},
		RegistrantsRoot: root[:], RegistrantsCount: len(rs), RegistrantsCommittedAt: &committed,
		Beacon: &flashline.BeaconRecord{Chain: chain, BeaconRound: round}}
	return api.NewDrawTranscript(l, flashline.NewDrawTranscript(l, entries)), signer
}

// verifyServer serves the transcript it is given at /sales/SALE/draw and
// runs verify-draw against it.
func verifyServer(t *testing.T, saleID string) func(d api.DrawTranscript, flags ...string) (string, error) {
	t.Helper()
	var mu sync.Mutex
	var doc api.DrawTranscript
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, "/sales/"+saleID+"/draw", r.URL.Path)
		_ = json.NewEncoder(w).Encode(doc)
	}))
	t.Cleanup(srv.Close)
	return func(d api.DrawTranscript, flags ...string) (string, error) {
		mu.Lock()
		doc = d
		mu.Unlock()
		out, _, err := runCLI(t, "", append([]string{"sale", "verify-draw", saleID, "--url", srv.URL}, flags...)...)
		return out, err
	}
}

// TestVerifyDrawFromTranscriptAlone: verify-draw checks a lottery from its
// transcript alone (no database URL, no token): as drawn it checks out;
// altered, it exits 1 naming the step that fails.
func TestVerifyDrawFromTranscriptAlone(t *testing.T) {
	t.Parallel()
	good, signer := drawnTranscript(t)
	verify := verifyServer(t, good.SaleID)
	out, err := verify(good, "--customer", "cust_3", "--root", *good.RegistrantsRoot, "--commitment", good.Commitment,
		"--beacon-public-key", fmt.Sprintf("%x", signer.PublicKey()))
	require.NoError(t, err, out)
	require.Contains(t, out, "The draw checks out.")
	require.Contains(t, out, "your rank")

	clone := func() api.DrawTranscript {
		d := good
		d.Registrants = append([]api.TranscriptRegistrant(nil), good.Registrants...)
		b := *good.Beacon
		d.Beacon = &b
		return d
	}
	for _, tc := range []struct {
		name  string
		alter func(d *api.DrawTranscript)
		flags []string
		step  string
	}{
		{"a registrant added", func(d *api.DrawTranscript) {
			r := flashline.RegistrantOf(d.SaleID, "cust_late")
			d.Registrants = append(d.Registrants, api.TranscriptRegistrant{Registrant: r.String(), Rank: len(d.Registrants) + 1})
		}, nil, "registrants"},
		{"a registrant dropped", func(d *api.DrawTranscript) { d.Registrants = d.Registrants[:len(d.Registrants)-1] }, nil, "registrants"},
		{"the seed", func(d *api.DrawTranscript) { s := "00112233445566778899aabbccddeeff"; d.Seed = &s }, nil, "commitment"},
		{"the beacon value", func(d *api.DrawTranscript) {
			s := "0" + (*d.Beacon.Randomness)[1:]
			if s == *d.Beacon.Randomness {
				s = "1" + s[1:]
			}
			d.Beacon.Randomness = &s
		}, nil, "beacon"},
		{"two ranks swapped", func(d *api.DrawTranscript) {
			d.Registrants[1].Registrant, d.Registrants[6].Registrant = d.Registrants[6].Registrant, d.Registrants[1].Registrant
		}, nil, "ranks"},
		{"another root than the one seen at the close", func(*api.DrawTranscript) {},
			[]string{"--root", fmt.Sprintf("%064x", 1)}, "registrants"},
	} {
		d := clone()
		tc.alter(&d)
		out, err := verify(d, tc.flags...)
		require.ErrorIs(t, err, errDrawMismatch, "%s:\n%s", tc.name, out)
		require.Contains(t, out, fmt.Sprintf("the %q step fails", tc.step), "%s:\n%s", tc.name, out)
	}
}

// TestVerifyCrowdWithBeacon: verify-draw checks a waiting room's crowd
// ranked with its beacon round from the transcript alone, signature
// included; a changed beacon value, a round from another chain, or a
// commitment dated after the round was published each fail the beacon step.
func TestVerifyCrowdWithBeacon(t *testing.T) {
	t.Parallel()
	sale := flashline.NewID(flashline.SaleIDPrefix)
	signer, err := flashline.NewBeaconSigner([]byte("verify-draw's crowd beacon key material"))
	require.NoError(t, err)
	opens := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	committed := opens.Add(300 * time.Millisecond)
	chain := flashline.BeaconChain{PublicKey: signer.PublicKey(), Genesis: opens.Add(-time.Hour), Period: 3 * time.Second}
	round := signer.Round(flashline.CrowdRound(chain, opens))
	seed := []byte("0123456789abcdef")
	holders := make([]string, 8)
	rs := make([]flashline.Registrant, len(holders))
	for i := range holders {
		holders[i] = fmt.Sprint("cust_", i)
		rs[i] = flashline.RegistrantOf(sale, holders[i])
	}
	root := flashline.RegistrantsRoot(rs)
	f := flashline.LotteryFinalSeed(sale, root, round.Randomness, seed)
	c := flashline.Crowd{SaleID: sale, Fairness: flashline.FairnessRandomizedAtOpen, OpensAt: opens, Seed: seed, PreopenCount: 10,
		Root: root[:], HolderCount: int64(len(holders)), CommittedAt: &committed, FinalSeed: f[:], Holders: holders,
		Beacon: &flashline.BeaconRecord{Chain: chain, BeaconRound: round}}
	good := api.NewCrowdTranscript(c, flashline.NewCrowdTranscript(c))
	verify := verifyServer(t, sale)

	out, err := verify(good, "--customer", "cust_3", "--root", *good.RegistrantsRoot,
		"--beacon-public-key", fmt.Sprintf("%x", signer.PublicKey()))
	require.NoError(t, err, out)
	require.Contains(t, out, "The draw checks out.")
	require.Contains(t, out, "your rank")

	other, err := flashline.NewBeaconSigner([]byte("another chain's key material for the test"))
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		alter func(d *api.DrawTranscript)
	}{
		{"the beacon value", func(d *api.DrawTranscript) {
			s := fmt.Sprintf("%x", make([]byte, 32))
			d.Beacon.Randomness = &s
		}},
		{"another chain's signature", func(d *api.DrawTranscript) {
			s := fmt.Sprintf("%x", other.Round(round.Round).Signature)
			d.Beacon.Signature = &s
		}},
		{"committed after the round", func(d *api.DrawTranscript) {
			d.RegistrationClosesAt = chain.RoundTime(round.Round).Add(time.Second).Format(time.RFC3339Nano)
		}},
	} {
		d := good
		b := *good.Beacon
		d.Beacon = &b
		tc.alter(&d)
		out, err := verify(d)
		require.ErrorIs(t, err, errDrawMismatch, "%s:\n%s", tc.name, out)
		require.Contains(t, out, `the "beacon" step fails`, "%s:\n%s", tc.name, out)
	}
}
