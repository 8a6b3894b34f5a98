//go:build race

package auth_test

// raceEnabled: the race detector is on; sync.Pool then drops what is put
// back at random, so a pooled object may be made anew (an allocation).
const raceEnabled = true
