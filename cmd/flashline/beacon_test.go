package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/jobs"
)

// TestCheckBeacon: the beacon's flags are all set or none; a key that is not
// a G2 point, a period that is not whole seconds, or no genesis is refused.
func TestCheckBeacon(t *testing.T) {
	t.Parallel()
	signer, err := flashline.NewBeaconSigner([]byte("serve's test beacon key material, 32+"))
	require.NoError(t, err)
	key := fmt.Sprintf("%x", signer.PublicKey())
	cfg := func(url, key string, genesis int, period time.Duration) serveConfig {
		return serveConfig{jobs: jobs.Config{BeaconURL: url}, beaconKey: key, beaconGenesis: genesis, beaconPeriod: period}
	}
	none := cfg("", "", 0, 0)
	require.NoError(t, checkBeacon(&none))
	require.Nil(t, none.beacon)
	good := cfg("http://127.0.0.1:9/beacon", key, 1692803367, 3*time.Second)
	require.NoError(t, checkBeacon(&good))
	require.NotNil(t, good.beacon)
	require.Equal(t, signer.PublicKey(), good.beacon.PublicKey)
	for name, c := range map[string]serveConfig{
		"key without url":   cfg("", key, 1692803367, 3*time.Second),
		"url without key":   cfg("http://127.0.0.1:9", "", 1692803367, 3*time.Second),
		"key not on G2":     cfg("http://127.0.0.1:9", key[:len(key)-2]+"00", 1692803367, 3*time.Second),
		"no genesis":        cfg("http://127.0.0.1:9", key, 0, 3*time.Second),
		"fractional period": cfg("http://127.0.0.1:9", key, 1692803367, 1500*time.Millisecond),
	} {
		require.Error(t, checkBeacon(&c), name)
	}
}
