package main

import (
	"syscall"
	"time"
)

// deferAccept asks the kernel to hand a connection to accept only once its
// first bytes have arrived (TCP_DEFER_ACCEPT), waiting up to d for them. A
// connection a client opened ahead of need (a browser's preconnect, an HTTP
// client's pool dialing one more than it used) then costs the server nothing
// until its request comes, and is never closed by the header timeout while
// the client believes it fresh: such a close reaches the client as a bare
// EOF on its next request, which Go's transport, among others, does not
// retry for a POST on a connection it never used.
func deferAccept(rc syscall.RawConn, d time.Duration) error {
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_DEFER_ACCEPT, int(d.Seconds()))
	}); err != nil {
		return err
	}
	return serr
}
