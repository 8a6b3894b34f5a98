package main

import (
	"errors"
	"net"
	"sync"
	"time"
)

// firstByteListener hands out a connection only once its first byte has
// arrived, waiting up to wait for it, as net/http waits for the next
// request on a keep-alive connection (Server.IdleTimeout) before its header
// timeout starts. For a new connection net/http starts the header timeout at
// accept: one a client opened ahead of need (a browser's preconnect, an
// HTTP client's pool dialing one more than it used) would be closed by it
// while the client believes it fresh, and the client would see a bare EOF
// on its next request, which Go's transport, among others, does not retry
// for a POST on a connection it never used.
//
// The kernel's TCP_DEFER_ACCEPT does the same, but on Linux 6.18 it was
// measured to leave about one new connection in 100,000 unanswered for 30
// s (TestListenAcceptsOnFirstBytes's comment says how), so the wait is here.
// A connection waiting for its first byte holds a goroutine and counts
// against --max-conns, as a served one does.
type firstByteListener struct {
	net.Listener
	wait  time.Duration
	ready chan net.Conn
	done  chan struct{}
	close sync.Once

	mu      sync.Mutex
	pending map[net.Conn]struct{} // waiting for their first byte
}

func firstBytes(ln net.Listener, wait time.Duration) *firstByteListener {
	l := &firstByteListener{Listener: ln, wait: wait, ready: make(chan net.Conn), done: make(chan struct{}),
		pending: map[net.Conn]struct{}{}}
	go l.acceptLoop()
	return l
}

func (l *firstByteListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close closes the listener and every connection still waiting for its
// first byte.
func (l *firstByteListener) Close() error {
	err := net.ErrClosed
	l.close.Do(func() {
		close(l.done)
		err = l.Listener.Close()
		l.mu.Lock()
		defer l.mu.Unlock()
		for c := range l.pending {
			c.Close()
		}
	})
	return err
}

// acceptLoop accepts until the listener is closed. Another accept error (too
// many open files) is waited out as net/http does.
func (l *firstByteListener) acceptLoop() {
	var backoff time.Duration
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				l.Close()
				return
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(backoff):
				continue
			case <-l.done:
				return
			}
		}
		backoff = 0
		go l.await(c)
	}
}

// await waits for c's first byte and hands c out, or closes it.
func (l *firstByteListener) await(c net.Conn) {
	l.mu.Lock()
	select {
	case <-l.done:
		l.mu.Unlock()
		c.Close()
		return
	default:
	}
	l.pending[c] = struct{}{}
	l.mu.Unlock()
	var b [1]byte
	err := c.SetReadDeadline(time.Now().Add(l.wait))
	if err == nil {
		_, err = c.Read(b[:])
	}
	l.mu.Lock()
	delete(l.pending, c)
	l.mu.Unlock()
	if err == nil {
		err = c.SetReadDeadline(time.Time{})
	}
	if err != nil {
		c.Close()
		return
	}
	select {
	case l.ready <- &firstByteConn{Conn: c, first: b[0]}:
	case <-l.done:
		c.Close()
	}
}

// firstByteConn is a connection whose first byte was read ahead.
type firstByteConn struct {
	net.Conn
	first byte
	given bool
}

func (c *firstByteConn) Read(p []byte) (int, error) {
	if !c.given && len(p) > 0 {
		c.given = true
		p[0] = c.first
		return 1, nil
	}
	return c.Conn.Read(p)
}
