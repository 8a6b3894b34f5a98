package roomtoken

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ErrTicketExpired is a ticket presented TicketTTL or more after its
// arrival. Like the other token errors it means a fresh ticket to a client.
var ErrTicketExpired = errors.New("ticket expired")

// TicketTTL is how long a ticket is good for: its "exp" is its "iat" (the
// arrival) plus TicketTTL, and ParseTicket refuses it from then on
// (ErrTicketExpired). A day is far longer than a wait in an open room, and
// than the wait before the open of a sale whose room is used in the day
// before it. An older ticket (taken more than a day before the open, or kept
// after the sale) is refused, and asking again gives a new place: before the
// open under randomized_at_open, the same draw and so the same rank;
// otherwise the back of the line.
const TicketTTL = 24 * time.Hour

// Ticket is a place in a sale's waiting room. It is held by the customer as a
// signed token, not stored: the token is the only record of it.
type Ticket struct {
	SaleID     string
	CustomerID string
	ArrivedAt  time.Time // kept to the second
	Position   int64     // arrival number among this sale's tickets (1-based)
	PreOpen    bool      // taken before the sale opened: ordered by Draw, not Position, under randomized_at_open
	Draw       uint64    // the customer's fixed draw for this sale (see Draw)
}

// ticketClaims are a ticket's JWT claims, in the order they are written.
// Every claim is written (no omitempty): the parser requires them all.
type ticketClaims struct {
	Audience  string `json:"aud"`     // "flashline-ticket"
	Subject   string `json:"sub"`     // the customer id
	IssuedAt  int64  `json:"iat"`     // the arrival, unix seconds
	ExpiresAt int64  `json:"exp"`     // iat + TicketTTL
	Sale      string `json:"sale"`    // the sale id
	Position  int64  `json:"pos"`     // arrival number, 1-based
	PreOpen   bool   `json:"preopen"` // taken before the open
	Draw      uint64 `json:"draw"`    // the customer's draw (0 unless pre-open)
}

// SignTicket returns t as a ticket token, good until TicketTTL after
// ArrivedAt, which is kept to the second. The caller passes a ticket that
// ParseTicket would accept (ids of 1-128 bytes of UTF-8 without control
// characters, Position at least 1, ArrivedAt in the years 2000-2200); the
// token of any other is refused when parsed.
func (k *Keyring) SignTicket(t Ticket) string {
	arrived := t.ArrivedAt.Unix()
	c := ticketClaims{
		Audience:  ticketAudience,
		Subject:   t.CustomerID,
		IssuedAt:  arrived,
		ExpiresAt: arrived + int64(TicketTTL/time.Second),
		Sale:      t.SaleID,
		Position:  t.Position,
		PreOpen:   t.PreOpen,
		Draw:      t.Draw,
	}
	var buf [512]byte // a plain ticket's claims, on the stack
	return k.keys[0].sign(c.appendJSON(buf[:0]))
}

// appendJSON appends c as marshal writes it: by hand when both ids are
// plain (printable ASCII but '"' and '\', which JSON writes as they are
// with HTML escaping off: every id the service makes), else by marshal.
// TestTicketClaimsAsMarshal holds the two to the same bytes.
func (c ticketClaims) appendJSON(b []byte) []byte {
	if !plainJSON(c.Subject) || !plainJSON(c.Sale) {
		return append(b, marshal(c)...)
	}
	b = append(b, `{"aud":"`...)
	b = append(b, c.Audience...)
	b = append(b, `","sub":"`...)
	b = append(b, c.Subject...)
	b = append(b, `","iat":`...)
	b = strconv.AppendInt(b, c.IssuedAt, 10)
	b = append(b, `,"exp":`...)
	b = strconv.AppendInt(b, c.ExpiresAt, 10)
	b = append(b, `,"sale":"`...)
	b = append(b, c.Sale...)
	b = append(b, `","pos":`...)
	b = strconv.AppendInt(b, c.Position, 10)
	b = append(b, `,"preopen":`...)
	b = strconv.AppendBool(b, c.PreOpen)
	b = append(b, `,"draw":`...)
	b = strconv.AppendUint(b, c.Draw, 10)
	return append(b, '}')
}

// plainJSON reports whether JSON writes s between its quotes as it is, with
// HTML escaping off: every byte printable ASCII, none '"' or '\'.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// ParseTicket verifies a ticket token's signature, format and expiry and
// returns the ticket; it never touches a database. Whether the ticket belongs
// to the caller and to the sale asked about is for the caller to check.
func (k *Keyring) ParseTicket(token string) (Ticket, error) {
	now := k.clock()
	if t, ok := k.tickets.Get(token, now); ok {
		return t, nil
	}
	t, err := k.parseTicket(token)
	if err != nil {
		return Ticket{}, fmt.Errorf("parse ticket: %w", err)
	}
	// Good until its exp (iat + TicketTTL), as parseTicket judges it.
	k.tickets.Put(token, t, t.ArrivedAt.Add(TicketTTL))
	return t, nil
}

func (k *Keyring) parseTicket(token string) (Ticket, error) {
	c, err := k.open(ticketAudience, token)
	if err != nil {
		return Ticket{}, err
	}
	if err := c.exactly("aud", "sub", "iat", "exp", "sale", "pos", "preopen", "draw"); err != nil {
		return Ticket{}, err
	}
	if err := checkID("sale id", *c.Sale); err != nil {
		return Ticket{}, err
	}
	if err := checkID("customer id", *c.Subject); err != nil {
		return Ticket{}, err
	}
	if err := checkTime("arrival time", *c.IssuedAt); err != nil {
		return Ticket{}, err
	}
	if *c.ExpiresAt != *c.IssuedAt+int64(TicketTTL/time.Second) {
		return Ticket{}, fmt.Errorf("%w: exp must be iat + %s", ErrMalformed, TicketTTL)
	}
	if *c.Position < 1 {
		return Ticket{}, fmt.Errorf("%w: position must be at least 1", ErrMalformed)
	}
	if exp := time.Unix(*c.ExpiresAt, 0); !k.clock().Before(exp) {
		return Ticket{}, fmt.Errorf("%w at %s", ErrTicketExpired, exp.UTC().Format(time.RFC3339))
	}
	return Ticket{
		SaleID:     *c.Sale,
		CustomerID: *c.Subject,
		ArrivedAt:  time.Unix(*c.IssuedAt, 0).UTC(),
		Position:   *c.Position,
		PreOpen:    *c.PreOpen,
		Draw:       *c.Draw,
	}, nil
}

// admissionIDInput is what AdmissionID hashes: the ticket's fields as compact
// JSON in this order, without HTML escaping, e.g.
// {"s":"sale_1","c":"cust_1","t":1767225600,"p":7,"o":false,"d":42}. It is
// the payload of the token format before JWTs, kept so that the admission id
// of a ticket, stored under a unique index, is derived as it always was.
type admissionIDInput struct {
	SaleID     string `json:"s"`
	CustomerID string `json:"c"`
	ArrivedAt  int64  `json:"t"` // unix seconds
	Position   int64  `json:"p"`
	PreOpen    bool   `json:"o"`
	Draw       uint64 `json:"d"`
}

// AdmissionID is the admission id for a ticket: base64url of the first 16
// bytes of SHA-256 over the ticket's fields (see admissionIDInput). The same
// ticket always yields the same id, whichever instance issues the admission
// and whichever key signed the ticket, so the database's unique index on the
// id makes one ticket good for one reservation.
func AdmissionID(t Ticket) string {
	sum := sha256.Sum256(marshal(admissionIDInput{
		SaleID:     t.SaleID,
		CustomerID: t.CustomerID,
		ArrivedAt:  t.ArrivedAt.Unix(),
		Position:   t.Position,
		PreOpen:    t.PreOpen,
		Draw:       t.Draw,
	}))
	return b64.EncodeToString(sum[:16])
}
