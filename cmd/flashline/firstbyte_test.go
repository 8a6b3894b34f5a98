package main

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A connection opened and left unused is not handed to the server (so its
// header timeout cannot close it under a client that believes it fresh):
// it is accepted when its first bytes come, and closed when the listener is.
//
// The kernel's TCP_DEFER_ACCEPT, tried first for this, passed this test but
// left a new connection now and then unanswered until its client gave up
// (30 s): make test's TestEdgesTicketsAndAdmissions, TestNorthline and
// TestGate each met it on a loaded machine, and so did 64 clients sending
// 200,000 requests to two net/http servers with it set (2 of 200,000, in
// one run of five).
func TestListenAcceptsOnFirstBytes(t *testing.T) {
	ln, metricsLn, err := listen(serveConfig{addr: "127.0.0.1:0", maxConns: 4})
	require.NoError(t, err)
	require.Nil(t, metricsLn)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	select {
	case c := <-accepted:
		c.Close()
		t.Fatal("a connection without a byte was accepted")
	case <-time.After(300 * time.Millisecond):
	}
	const request = "GET /healthz HTTP/1.1\r\n"
	_, err = conn.Write([]byte(request))
	require.NoError(t, err)
	select {
	case c := <-accepted:
		got := make([]byte, len(request))
		_, err := io.ReadFull(c, got)
		require.NoError(t, err)
		require.Equal(t, request, string(got), "the first byte is read again")
		c.Close()
	case <-time.After(30 * time.Second):
		t.Fatal("the connection's first bytes came and it was not accepted")
	}

	// One still waiting is closed with the listener.
	idle, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer idle.Close()
	fb := ln.(*firstByteListener)
	require.Eventually(t, func() bool {
		fb.mu.Lock()
		defer fb.mu.Unlock()
		return len(fb.pending) == 1
	}, 30*time.Second, 10*time.Millisecond, "the connection waits for its first byte")
	require.NoError(t, ln.Close())
	require.NoError(t, idle.SetReadDeadline(time.Now().Add(30*time.Second)))
	_, err = idle.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "a waiting connection is closed with the listener")
	_, err = ln.Accept()
	require.ErrorIs(t, err, net.ErrClosed)
}
