// Package testserver holds real `serve` processes for tests.
//
// It runs real `flashline serve` processes for tests, built
// with the race detector, and talks to them over HTTP the way a client that
// knows only the contract would.
package testserver
