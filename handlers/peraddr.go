package handlers

import (
	"encoding/binary"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/flashline/flashline"
)

// A trusted proxy (a load balancer, nginx, an edge) carries many clients'
// requests on its connections, so the listener's bound on one address's
// connections (serve's --max-conns-per-addr) cannot apply to it: at accept
// only the proxy's address is known. Its requests say whose they are in
// X-Forwarded-For, and the front door bounds what it can there: the requests
// in flight per client address the proxies forwarded for, with the same
// number (a request held through a proxy holds one of the proxy's
// connections to the service, as a direct client's holds one of its own).
// One more is answered 429 rate_limited before anything else is done for
// it. A status stream counts for as long as it is open.
//
// The counts are kept only while an address has a request in flight (a
// sharded map of counters, an address removed when its count is back to
// zero): a flood of distinct addresses, made up or not, holds no more
// memory than the requests it has in flight.

// ClientAddr is the client address of a request from peer (its
// connection's address, RemoteAddr) that carries forwarded (the values of
// its X-Forwarded-For headers, in order), given the proxies trusted: the
// right-most address of the chain that is not a trusted proxy's, read from
// the right (a proxy appends the address it was sent the request from, so
// what lies left of the first untrusted address is the client's to write).
// forwarded is false when peer is not a trusted proxy (its request's
// X-Forwarded-For says nothing anyone vouches for: its client is peer) or
// when the chain names no address outside trusted before it ends or meets
// a value that is not an IP address (a proxy's own request, or a client that
// is a trusted address itself). It does not allocate.
func ClientAddr(peer netip.Addr, forwarded []string, trusted []netip.Prefix) (client netip.Addr, ok bool) {
	if !Trusted(peer, trusted) {
		return netip.Addr{}, false
	}
	for i := len(forwarded) - 1; i >= 0; i-- {
		for rest := forwarded[i]; ; {
			comma := strings.LastIndexByte(rest, ',')
			item := strings.TrimSpace(rest[comma+1:])
			addr, err := netip.ParseAddr(item)
			if err != nil {
				return netip.Addr{}, false
			}
			if addr = addr.Unmap().WithZone(""); !Trusted(addr, trusted) {
				return addr, true
			}
			if comma < 0 {
				break
			}
			rest = rest[:comma]
		}
	}
	return netip.Addr{}, false
}

// Trusted says whether addr is in one of the trusted prefixes.
func Trusted(addr netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// ClientKey is what one client address counts against: the address, or
// for IPv6 its /64, which one host is commonly given whole.
func ClientKey(addr netip.Addr) netip.Prefix {
	addr = addr.Unmap()
	bits := 32
	if addr.Is6() {
		bits = 64
	}
	key, _ := addr.Prefix(bits)
	return key
}

// addrShards is how many parts the counts are split into, each under a
// lock of its own, so that concurrent requests of different addresses
// rarely wait for each other.
const addrShards = 64

// addrBound counts the requests in flight per forwarded client address,
// at most max each.
type addrBound struct {
	max     int
	trusted []netip.Prefix
	shards  [addrShards]addrShard
}

type addrShard struct {
	mu sync.Mutex
	n  map[netip.Prefix]int
	_  [48]byte // a cache line each: the shards' locks do not share one
}

// newAddrBound bounds each forwarded address to max requests in flight;
// nil (no bound) when max <= 0 or no proxy is trusted.
func newAddrBound(max int, trusted []netip.Prefix) *addrBound {
	if max <= 0 || len(trusted) == 0 {
		return nil
	}
	b := &addrBound{max: max, trusted: trusted}
	for i := range b.shards {
		b.shards[i].n = map[netip.Prefix]int{}
	}
	return b
}

// keyOf is what r counts against: its forwarded client's key, when r came
// from a trusted proxy that named one (ClientAddr). b may be nil (no bound).
func (b *addrBound) keyOf(r *http.Request) (netip.Prefix, bool) {
	if b == nil {
		return netip.Prefix{}, false
	}
	forwarded := r.Header["X-Forwarded-For"]
	if len(forwarded) == 0 {
		return netip.Prefix{}, false
	}
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Prefix{}, false
	}
	client, ok := ClientAddr(peer.Addr().Unmap().WithZone(""), forwarded, b.trusted)
	if !ok {
		return netip.Prefix{}, false
	}
	return ClientKey(client), true
}

// shard is where key is counted.
func (b *addrBound) shard(key netip.Prefix) *addrShard {
	a := key.Addr().As16()
	h := (binary.LittleEndian.Uint64(a[:8]) ^ binary.LittleEndian.Uint64(a[8:])) * 0x9e3779b97f4a7c15
	return &b.shards[h>>(64-6)] // 2^6 == addrShards
}

// acquire counts one more request of key; false, counting nothing, when
// key already has max in flight.
func (b *addrBound) acquire(key netip.Prefix) bool {
	s := b.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.n[key]
	if n >= b.max {
		return false
	}
	s.n[key] = n + 1
	return true
}

// release counts one request of key less, forgetting key at zero.
func (b *addrBound) release(key netip.Prefix) {
	s := b.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.n[key] - 1; n > 0 {
		s.n[key] = n
	} else {
		delete(s.n, key)
	}
}

// tracked is how many addresses have requests in flight.
func (b *addrBound) tracked() int {
	total := 0
	for i := range b.shards {
		s := &b.shards[i]
		s.mu.Lock()
		total += len(s.n)
		s.mu.Unlock()
	}
	return total
}

// addrDoor puts the bound on the requests in flight of one client address
// behind a trusted proxy in front of next: Routes' front door (its refusal
// counted in the origin's metrics) and an edge's routes (boundPerAddr) both
// go through it.
type addrDoor struct {
	next     http.Handler
	perAddr  *addrBound // nil: no bound
	addrBusy prepared
}

// boundPerAddr is an edge's routes, next, behind bound; next itself when
// there is no bound.
func boundPerAddr(next http.Handler, bound *addrBound) http.Handler {
	if bound == nil {
		return next
	}
	e := lookupError(flashline.ErrAddressInFlight)
	return &addrDoor{next: next, perAddr: bound, addrBusy: prepareError(e, nil, nil)}
}

func (d *addrDoor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if key, ok := d.perAddr.keyOf(r); ok {
		if !d.perAddr.acquire(key) {
			refuse(w, &d.addrBusy, time.Now())
			return
		}
		defer d.perAddr.release(key)
	}
	d.next.ServeHTTP(w, r)
}
