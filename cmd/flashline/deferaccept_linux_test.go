package main

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A connection opened and left unused is not handed to the server (so its
// header timeout cannot close it under a client that believes it fresh):
// it is accepted when its first bytes come.
func TestListenAcceptsOnFirstBytes(t *testing.T) {
	ln, metricsLn, err := listen(serveConfig{addr: "127.0.0.1:0", maxConns: 4})
	require.NoError(t, err)
	require.Nil(t, metricsLn)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
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
	_, err = conn.Write([]byte("GET /healthz HTTP/1.1\r\n"))
	require.NoError(t, err)
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(30 * time.Second):
		t.Fatal("the connection's first bytes came and it was not accepted")
	}
}
