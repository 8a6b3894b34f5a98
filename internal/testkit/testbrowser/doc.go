// Package testbrowser holds the headless Chromium of the browser tests.
//
// It starts the headless Chromium the browser tests drive
// (waitpage/, handlers/' API reference, the console). Setting up the browser
// is the Makefile's job (`make chromium`, which `make test` runs first),
// never a test's: without one on PATH the test fails and says so.
package testbrowser
