//go:build !linux

package main

import (
	"syscall"
	"time"
)

// deferAccept does nothing here: TCP_DEFER_ACCEPT is Linux's (see
// deferaccept_linux.go). A connection opened and left unused is closed by
// the header timeout, as by any Go server.
func deferAccept(syscall.RawConn, time.Duration) error { return nil }
