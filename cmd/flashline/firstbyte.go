package main

import (
	"container/list"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashline/flashline/handlers"
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
//
// It also holds the connection slots (connLimits), so that a crowd of
// silent or idle connections cannot keep the buyers out: one address holds
// at most perAddr of them; the first-byte wait shortens as the slots fill
// (firstByteWait), and a waiting connection is held to the wait of the
// moment, not of its arrival; and when every slot is taken the oldest idle
// keep-alive connection is closed to let a new one in. An idle client
// closed so meets what Server.IdleTimeout does to it, which clients retry;
// a silent one let go early meets the bare EOF above, a risk taken only on
// a busy server, where its slot is worth more to the next buyer.
type firstByteListener struct {
	net.Listener
	limits connLimits
	ready  chan net.Conn
	done   chan struct{}
	close  sync.Once
	// freed is signalled when a slot is given back.
	freed chan struct{}
	// refused, expired and evicted count the connections closed for their
	// address's bound, for a first byte that did not come within the wait
	// of the moment, and as the oldest idle ones of a full server.
	refused, expired, evicted atomic.Int64

	mu        sync.Mutex
	open      int                        // slots taken: connections waiting, served, or being accepted
	perAddr   map[netip.Prefix]int       // connections open per address (addrKey)
	pending   map[net.Conn]*list.Element // waiting for their first byte, in arrivals
	arrivals  *list.List                 // of *arrival, oldest first
	idle      map[net.Conn]*list.Element // keep-alive connections between requests, in idleSince
	idleSince *list.List                 // of net.Conn, idle longest first
}

// connLimits are the bounds on the API's client connections.
type connLimits struct {
	// max is --max-conns: slots at most, each a connection waiting for its
	// first byte or served (a goroutine and its buffers).
	max int
	// perAddr is --max-conns-per-addr: slots one address may hold (0: no
	// bound). trusted (--trusted-proxies) are the addresses it does not
	// apply to: a proxy's connections carry many clients, and at accept
	// only the proxy's address is known; the front door bounds their
	// clients' requests in flight instead, by X-Forwarded-For (handlers'
	// peraddr.go), with the same number.
	perAddr int
	trusted []netip.Prefix
	// wait is the longest first-byte wait, while at most half the slots
	// are taken; fullWait the shortest, when all are.
	wait, fullWait time.Duration
}

// fullFirstByteWait is how long a new connection may wait for its first
// byte when every slot is taken: a client that connects to send a request
// sends it within a round trip, so what waits longer on a full server is
// a preconnect or a flood, and a slot is worth more to the next buyer.
const fullFirstByteWait = time.Second

// arrival is a connection waiting for its first byte, and since when.
type arrival struct {
	conn  net.Conn
	since time.Time
}

func firstBytes(ln net.Listener, limits connLimits) *firstByteListener {
	l := &firstByteListener{Listener: ln, limits: limits, ready: make(chan net.Conn), done: make(chan struct{}),
		freed: make(chan struct{}, 1), perAddr: map[netip.Prefix]int{},
		pending: map[net.Conn]*list.Element{}, arrivals: list.New(),
		idle: map[net.Conn]*list.Element{}, idleSince: list.New()}
	go l.acceptLoop()
	return l
}

// firstByteWait is how long a new connection may wait for its first byte
// with open of max slots taken: the whole wait up to half, then less in
// proportion to the room left, down to fullWait when all are taken. A
// flood of silent connections is then let go faster the more of the
// server it holds, while a preconnect on a quiet server keeps its minute.
func firstByteWait(open int, limits connLimits) time.Duration {
	if 2*open <= limits.max {
		return limits.wait
	}
	if open >= limits.max {
		return limits.fullWait
	}
	room := float64(limits.max-open) / (float64(limits.max) / 2) // 1 at half, 0 when full
	return limits.fullWait + time.Duration(room*float64(limits.wait-limits.fullWait))
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
		waiting := make([]net.Conn, 0, len(l.pending))
		for c := range l.pending {
			waiting = append(waiting, c)
		}
		l.mu.Unlock()
		for _, c := range waiting {
			c.Close()
		}
	})
	return err
}

// acceptLoop accepts until the listener is closed, a slot taken first for
// each connection. Another accept error (too many open files) is waited out
// as net/http does.
func (l *firstByteListener) acceptLoop() {
	var backoff time.Duration
	for l.acquire() {
		c, err := l.Listener.Accept()
		if err != nil {
			l.release(netip.Prefix{})
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
		key, ok := l.admit(c.RemoteAddr())
		if !ok {
			l.refused.Add(1)
			refuse(c)
			l.release(netip.Prefix{})
			continue
		}
		go l.await(&slotConn{Conn: c, l: l, key: key})
	}
}

// acquire takes a slot, waiting for one while all are taken: it closes the
// connections that have waited for their first byte longer than the wait
// of the moment allows and, the server full, the oldest idle keep-alive
// one. False when the listener is closed.
func (l *firstByteListener) acquire() bool {
	for {
		victims, taken, next := l.makeRoom(time.Now())
		for _, c := range victims {
			c.Close()
		}
		if taken {
			return true
		}
		if len(victims) > 0 {
			continue
		}
		if !l.waitForRoom(next) {
			return false
		}
	}
}

// waitForRoom waits until a slot is given back or, when next is not 0,
// until next has passed; false when the listener is closed meanwhile.
func (l *firstByteListener) waitForRoom(next time.Duration) bool {
	var expiry <-chan time.Time
	if next > 0 {
		t := time.NewTimer(next)
		defer t.Stop()
		expiry = t.C
	}
	select {
	case <-l.freed:
	case <-expiry:
	case <-l.done:
		return false
	}
	return true
}

// makeRoom takes a slot if there is one (taken), after picking the
// connections to close: those waited for longer than firstByteWait allows
// now, oldest first, and, when no slot is left and none of them frees one,
// the connection idle longest. next is when the oldest still waiting will
// have waited too long (0: none waits).
func (l *firstByteListener) makeRoom(now time.Time) (victims []net.Conn, taken bool, next time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	wait := firstByteWait(l.open, l.limits)
	for e := l.arrivals.Front(); e != nil; e = l.arrivals.Front() {
		a := e.Value.(*arrival)
		if waited := now.Sub(a.since); waited < wait {
			next = wait - waited
			break
		}
		l.arrivals.Remove(e)
		victims = append(victims, a.conn)
	}
	l.expired.Add(int64(len(victims)))
	switch {
	case l.open < l.limits.max:
		l.open++
		return victims, true, 0
	case len(victims) > 0:
		return victims, false, 0
	}
	if e := l.idleSince.Front(); e != nil {
		c := l.idleSince.Remove(e).(net.Conn)
		delete(l.idle, c)
		l.evicted.Add(1)
		return []net.Conn{c}, false, 0
	}
	return nil, false, next
}

// admit counts a new connection against its address's bound; false when
// the address already holds as many as it may.
func (l *firstByteListener) admit(addr net.Addr) (netip.Prefix, bool) {
	key, bounded := l.addrKey(addr)
	if !bounded {
		return netip.Prefix{}, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.perAddr[key] >= l.limits.perAddr {
		return netip.Prefix{}, false
	}
	l.perAddr[key]++
	return key, true
}

// addrKey is what a connection from addr counts against: its IP address,
// or for IPv6 its /64, which one host is commonly given whole. bounded is
// false when no bound applies: none set, a trusted proxy's address, or an
// address that is not IP.
func (l *firstByteListener) addrKey(addr net.Addr) (key netip.Prefix, bounded bool) {
	if l.limits.perAddr <= 0 {
		return netip.Prefix{}, false
	}
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return netip.Prefix{}, false
	}
	ip, ok := netip.AddrFromSlice(tcp.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ip = ip.Unmap()
	if handlers.Trusted(ip, l.limits.trusted) {
		return netip.Prefix{}, false
	}
	return handlers.ClientKey(ip), true
}

// release gives back a slot, and the address's count when key is valid.
func (l *firstByteListener) release(key netip.Prefix) {
	l.mu.Lock()
	l.open--
	if key.IsValid() {
		if l.perAddr[key]--; l.perAddr[key] <= 0 {
			delete(l.perAddr, key)
		}
	}
	l.mu.Unlock()
	select {
	case l.freed <- struct{}{}:
	default:
	}
}

// refuse closes a connection over its address's bound with a reset: it
// was never served, and nothing of it is kept in TIME_WAIT.
func refuse(c net.Conn) {
	if tcp, ok := c.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	c.Close()
}

// held is how many slots are taken.
func (l *firstByteListener) held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// connState is the server's http.Server.ConnState: it keeps the idle
// keep-alive connections in the order they went idle, for makeRoom.
func (l *firstByteListener) connState(c net.Conn, state http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.idle[c]; ok {
		l.idleSince.Remove(e)
		delete(l.idle, c)
	}
	if state == http.StateIdle {
		l.idle[c] = l.idleSince.PushBack(c)
	}
}

// await waits for c's first byte and hands c out, or closes it.
func (l *firstByteListener) await(c net.Conn) {
	now := time.Now()
	l.mu.Lock()
	select {
	case <-l.done:
		l.mu.Unlock()
		c.Close()
		return
	default:
	}
	l.pending[c] = l.arrivals.PushBack(&arrival{conn: c, since: now})
	l.mu.Unlock()
	// The longest wait: a shorter one, as the server fills, is makeRoom's
	// to apply, oldest first, when a slot is wanted. A deadline of the
	// moment of arrival would let the younger go first, and a slot go
	// while nobody asks for it.
	var b [1]byte
	err := c.SetReadDeadline(now.Add(l.limits.wait))
	if err == nil {
		_, err = c.Read(b[:])
	}
	l.mu.Lock()
	l.arrivals.Remove(l.pending[c])
	delete(l.pending, c)
	l.mu.Unlock()
	if err == nil {
		err = c.SetReadDeadline(time.Time{})
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		l.expired.Add(1)
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

// slotConn is an accepted connection: closing it gives its slot back.
type slotConn struct {
	net.Conn
	l     *firstByteListener
	key   netip.Prefix
	close sync.Once
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.close.Do(func() { c.l.release(c.key) })
	return err
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
