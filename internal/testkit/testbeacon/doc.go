// Package testbeacon holds a randomness beacon per test: drand's format,
// signed with a test key.
//
// It is a public randomness beacon of a test's own: an HTTP
// server on 127.0.0.1 answering rounds in drand's format, signed with a key
// of the test's (flashline.BeaconSigner), so that the draw's code fetches and
// verifies them as it would a real beacon's. A round is answered only once
// the test has released it: a test decides when the beacon "publishes",
// never the wall clock.
package testbeacon
