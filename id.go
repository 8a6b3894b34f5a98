package flashline

import "github.com/oklog/ulid/v2"

// Id prefixes. Every id the service makes is a prefix, an underscore and a
// ULID (26 characters of Crockford's base32, time-ordered), e.g.
// "sale_01J9Z3…". Clients treat ids as opaque; the service checks their shape
// before anything else, so that an id it cannot have made costs nothing.
const (
	SaleIDPrefix        = "sale"
	ReservationIDPrefix = "res"
	OrderIDPrefix       = "ord"
)

const ulidLen = 26

// NewID returns a new id with the given prefix.
func NewID(prefix string) string {
	return prefix + "_" + ulid.Make().String()
}

// crockford marks the characters of a ULID.
var crockford = func() (t [256]bool) {
	for _, c := range "0123456789ABCDEFGHJKMNPQRSTVWXYZ" {
		t[c] = true
	}
	return t
}()

// ValidID reports whether id has the shape of an id NewID(prefix) makes.
func ValidID(prefix, id string) bool {
	n := len(prefix)
	if len(id) != n+1+ulidLen || id[:n] != prefix || id[n] != '_' {
		return false
	}
	u := id[n+1:]
	if u[0] > '7' { // a ULID's first character carries 3 bits
		return false
	}
	for i := 0; i < len(u); i++ {
		if !crockford[u[i]] {
			return false
		}
	}
	return true
}
