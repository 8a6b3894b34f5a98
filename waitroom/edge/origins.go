package edge

import "strings"

// Which origin a request an edge passes on goes to (handlers' originProxy;
// the Worker's passOn follows the same): its customer's (CustomerOrigin),
// unless that origin is marked down, then the next in the list; an origin
// is marked down by a request passed on to it that could not reach it, and
// up by one it answers or by a pull it answers (every origin hears every
// pull, so one back on its address is used again within a pull).

// CustomerOrigin is the origin (of n) a customer's requests go to first:
// FNV-1a (32 bits) of the signed part of authorization, the request's
// Authorization header (originKey), mixed by MurmurHash3's finalizer
// (FNV's high bits alone follow a key's last bytes poorly) and scaled to n
// by its high bits ((h × n) >> 32). A customer sticks to one origin,
// through any edge and any of the Worker's isolates (waitroom/worker's
// passOn computes the same of an ASCII header), so an origin's bounds per
// customer (requests in flight, status streams) hold as with one origin,
// and a store's customers spread over its origins.
func CustomerOrigin(authorization string, n int) int {
	key := originKey(authorization)
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return int(uint64(h) * uint64(n) >> 32)
}

// originKey is the part of an Authorization header that one token can be
// spelled in one way only: its payload, between the token's first and last
// dots, which the token's signature covers as it is. The origins accept a
// token under any case of "Bearer", with spaces around it, and with its
// signature's spare last bits set; a key of the whole header would let a
// shopper choose their origin by respelling it, and so hold an origin's
// bounds per customer once on each origin. A header without two dots is
// its own key (the origins refuse it).
func originKey(authorization string) string {
	i, j := strings.IndexByte(authorization, '.'), strings.LastIndexByte(authorization, '.')
	if i < 0 || i == j {
		return authorization
	}
	return authorization[i+1 : j]
}

// OriginDown reports whether origin n (of Options.Origins) is marked down:
// a request passed on to it could not reach it (MarkOrigin), and neither a
// request since nor a pull has been answered by it.
func (e *Client) OriginDown(n int) bool { return e.down[n].Load() }

// MarkOrigin records whether a request passed on to origin n reached it
// (up) or could not (down).
func (e *Client) MarkOrigin(n int, up bool) { e.down[n].Store(!up) }
