package roomtoken

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashline/flashline"
)

// The edge's documents (package edge is the edge's side, waitroom's origin.go
// the origin's). An origin (an
// instance with the database) publishes every waiting room it knows of in
// one signed document, the watermarks: what an edge, which has no database,
// needs to hand out tickets and answer status polls and admit. Edges send the
// origins signed requests of their own: the pre-open tickets they gave out,
// in total (report), and the positions for the tickets they place by arrival
// (lease).
//
// Each is a JWS in compact form, HS256, signed with the waiting-room
// keyring's signing key (the header is a ticket's, {"alg":"HS256","kid":...,
// "typ":"JWT"}), whose payload is one JSON object with "aud" (the kind),
// "iat" and "exp" in Unix milliseconds, and "body". Any holder of the keys
// verifies it; a document whose exp has passed is not used.

// The audiences of the edge's documents.
const (
	watermarksAudience = "flashline-watermarks"
	reportAudience     = "flashline-edge-report"
	leaseAudience      = "flashline-edge-lease"
)

// Bounds on the edge's documents.
const (
	// WatermarksTTL is how long a watermarks document is good for after it
	// was made: an edge that has heard nothing newer since answers "waiting"
	// with stale set, and admits nobody.
	WatermarksTTL = 3 * time.Second
	// requestTTL is how long an edge's signed request is good for.
	requestTTL = 10 * time.Second
	// MaxDocLen bounds a document read from the network, before any
	// decoding.
	MaxDocLen = 4 << 20
	// MaxEdgeIDLen bounds an edge's id.
	MaxEdgeIDLen = 64
)

// EdgeSale is what the watermarks say of one waiting room: the sale cache's
// entry (flashline.SaleFacts) less what only the purchase path needs.
type EdgeSale struct {
	ID                   string              `json:"id"`
	State                flashline.SaleState `json:"state"`
	OpensAt              *time.Time          `json:"opensAt,omitempty"`
	Fairness             flashline.Fairness  `json:"fairness"`
	ChallengeBits        int                 `json:"challengeBits"`
	MinAccountAgeSeconds int                 `json:"minAccountAgeSeconds"`
	SoldOut              bool                `json:"soldOut"`
	// Available is the units left as last read, and PendingHolds whether a
	// sold-out sale's pending holds could still give a unit back (status
	// answers sold_out for now, not for good).
	Available    int64  `json:"available"`
	PendingHolds bool   `json:"pendingHolds"`
	Held         bool   `json:"held"`
	Message      string `json:"message,omitempty"`
	// The line: the watermark (ranks up to it may be admitted), the pace it
	// moves at, the next position to hand out, the pre-open crowd as frozen
	// at the open (-1: not yet) in ranks and positions, and the pre-open
	// tickets counted so far.
	AdmittedThrough  int64   `json:"admittedThrough"`
	Pace             float64 `json:"pace"`
	NextPosition     int64   `json:"nextPosition"`
	PreopenCount     int64   `json:"preopenCount"`
	PreopenPositions int64   `json:"preopenPositions"`
	PreopenTickets   int64   `json:"preopenTickets"`
	// SealedSeed is the draw's secret seed sealed (AES-256-GCM) under a key
	// derived from the signing key (sealKey): an edge needs it to compute a
	// customer's draw, and whoever does not hold the waiting-room keys
	// learns nothing of it before the policy reveals it at the open.
	SealedSeed []byte `json:"sealedSeed"`
	// FinalSeed is the seed the committed pre-open crowd is ranked by
	// (public: the draw's transcript publishes it), absent until then.
	FinalSeed []byte `json:"finalSeed,omitempty"`
	// Beacon and BeaconRound: the crowd's beacon (the policy names it).
	Beacon      bool   `json:"beacon,omitempty"`
	BeaconRound uint64 `json:"beaconRound,omitempty"`
	// Variants are the sale's variants in order as its waiters are told
	// of them (none: a sale without variants): what an edge's status
	// answers carry, as the origin's do. Never a count: the document is the
	// edges', but the answers built from it are anyone's.
	Variants []EdgeVariant `json:"variants,omitempty"`
}

// EdgeVariant is one variant of a sale as the watermarks say it: its SKU,
// its title and what shoppers are told of its stock.
type EdgeVariant struct {
	SKU          string                 `json:"sku"`
	Title        string                 `json:"title"`
	Availability flashline.Availability `json:"availability"`
}

// Watermarks is the document an origin publishes: every waiting room it
// knows of, as of DBNow, the database's clock as the origin estimates it.
type Watermarks struct {
	IssuedAt  time.Time
	ExpiresAt time.Time
	DBNow     time.Time
	Sales     []EdgeSale
}

// envelope is a document's payload.
type envelope struct {
	Audience  string          `json:"aud"`
	IssuedAt  int64           `json:"iat"` // Unix ms
	ExpiresAt int64           `json:"exp"` // Unix ms
	Body      json.RawMessage `json:"body"`
}

type watermarksBody struct {
	DBNow int64      `json:"dbNow"` // Unix ms
	Sales []EdgeSale `json:"sales"`
}

// signDoc signs body as a document of kind aud, good from now for ttl.
func (k *Keyring) signDoc(aud string, now time.Time, ttl time.Duration, body any) string {
	b, err := json.Marshal(body)
	if err != nil {
		panic("waitroom: encode document: " + err.Error())
	}
	return k.keys[0].sign(marshal(envelope{Audience: aud, IssuedAt: now.UnixMilli(), ExpiresAt: now.Add(ttl).UnixMilli(), Body: b}))
}

// openDoc verifies a document of kind aud and decodes its body into v; it
// returns the envelope and the key that signed it. Expiry is for the caller
// to judge (by which clock depends on the document).
func (k *Keyring) openDoc(aud, token string, v any) (envelope, key, error) {
	var env envelope
	if len(token) > MaxDocLen {
		return env, key{}, fmt.Errorf("%w: longer than %d bytes", ErrMalformed, MaxDocLen)
	}
	header, rest, ok1 := strings.Cut(token, ".")
	payload, sig, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || strings.Contains(sig, ".") || len(sig) != sigB64Len {
		return env, key{}, fmt.Errorf("%w: want 3 dot-separated segments", ErrMalformed)
	}
	var signer key
	found := false
	for _, kk := range k.keys {
		if kk.header == header {
			signer, found = kk, true
			break
		}
	}
	if !found {
		return env, key{}, fmt.Errorf("%w: header names no key of the keyring", ErrUnknownKey)
	}
	rawSig, err := b64.DecodeString(sig)
	if err != nil {
		return env, key{}, fmt.Errorf("%w: signature: %v", ErrMalformed, err)
	}
	want, err := jwt.SigningMethodHS256.Sign(header+"."+payload, signer.secret)
	if err != nil || !hmac.Equal(rawSig, want) {
		return env, key{}, ErrBadSignature
	}
	raw, err := b64.DecodeString(payload)
	if err != nil {
		return env, key{}, fmt.Errorf("%w: payload: %v", ErrMalformed, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil {
		return env, key{}, fmt.Errorf("%w: payload: %v", ErrMalformed, err)
	}
	if env.Audience != aud {
		return env, key{}, fmt.Errorf("%w: audience %q, want %q", ErrWrongKind, env.Audience, aud)
	}
	if err := json.Unmarshal(env.Body, v); err != nil {
		return env, key{}, fmt.Errorf("%w: body: %v", ErrMalformed, err)
	}
	return env, signer, nil
}

// sealKey is the key that seals the draw's seed in a document signed by k:
// HMAC-SHA256(secret, "flashline draw seed seal v1").
func (k key) sealKey() []byte {
	m := hmac.New(sha256.New, k.secret)
	io.WriteString(m, "flashline draw seed seal v1")
	return m.Sum(nil)
}

func (k key) aead() cipher.AEAD {
	block, err := aes.NewCipher(k.sealKey())
	if err != nil {
		panic("waitroom: seal: " + err.Error()) // a 32-byte key always makes a cipher
	}
	g, err := cipher.NewGCM(block)
	if err != nil {
		panic("waitroom: seal: " + err.Error())
	}
	return g
}

// seal encrypts seed for saleID: nonce ‖ ciphertext, the sale id as the
// additional data (a sealed seed cannot be moved to another sale).
func (k key) seal(saleID string, seed []byte) []byte {
	g := k.aead()
	nonce := make([]byte, g.NonceSize())
	rand.Read(nonce)
	return g.Seal(nonce, nonce, seed, []byte(saleID))
}

func (k key) unseal(saleID string, sealed []byte) ([]byte, error) {
	g := k.aead()
	if len(sealed) < g.NonceSize() {
		return nil, fmt.Errorf("%w: sealed seed too short", ErrMalformed)
	}
	seed, err := g.Open(nil, sealed[:g.NonceSize()], sealed[g.NonceSize():], []byte(saleID))
	if err != nil {
		return nil, fmt.Errorf("%w: sealed seed of sale %s", ErrBadSignature, saleID)
	}
	return seed, nil
}

// SignWatermarks signs every waiting room of sales (others are left out) as
// a watermarks document made at now (the origin's clock), good for
// WatermarksTTL; dbNow is the database's clock as the origin estimates it.
// The body is sealed (AES-256-GCM, under the signing key's seal key): the
// document is served to anyone at GET /edge/watermarks, and what it holds
// (every waiting-room sale, scheduled ones not yet announced included, their
// opening times, stock, pre-open counts, the operator's message and each
// variant's availability) is for
// the edges, which hold the waiting-room keys, only.
func (k *Keyring) SignWatermarks(sales []flashline.SaleFacts, now, dbNow time.Time) string {
	signer := k.keys[0]
	body := watermarksBody{DBNow: dbNow.UnixMilli(), Sales: []EdgeSale{}}
	for _, s := range sales {
		if s.Admission != flashline.AdmissionWaitingRoom {
			continue
		}
		body.Sales = append(body.Sales, EdgeSale{
			ID: s.ID, State: s.State, OpensAt: s.OpensAt, Fairness: s.Room.Fairness, ChallengeBits: s.Room.ChallengeBits,
			MinAccountAgeSeconds: s.Room.MinAccountAgeSeconds, SoldOut: s.SoldOut, Available: s.Available, PendingHolds: s.PendingHolds,
			Held: s.Room.Held, Message: s.Room.Broadcast,
			AdmittedThrough: s.Room.AdmittedThrough, Pace: s.Room.Pace, NextPosition: s.Room.NextPosition,
			PreopenCount: s.Room.PreopenCount, PreopenPositions: s.Room.PreopenPositions, PreopenTickets: s.Room.PreopenTickets,
			SealedSeed: signer.seal(s.ID, s.Room.DrawSeed), FinalSeed: s.Room.FinalSeed,
			Beacon: s.Room.Beacon, BeaconRound: s.Room.BeaconRound,
			Variants: edgeVariants(s.Variants),
		})
	}
	plain, err := json.Marshal(body)
	if err != nil {
		panic("waitroom: encode watermarks: " + err.Error())
	}
	return k.signDoc(watermarksAudience, now, WatermarksTTL, sealedWatermarks{Sealed: signer.seal(watermarksSealAD, plain)})
}

// edgeVariants are vs as the watermarks say them: at most
// flashline.MaxVariants, each title cut to flashline.MaxTitleLength
// characters (a sale's variants are within both already: the bounds keep a
// document's size bounded whatever memory holds), and availability only.
func edgeVariants(vs []flashline.VariantFacts) []EdgeVariant {
	if len(vs) == 0 {
		return nil
	}
	vs = vs[:min(len(vs), flashline.MaxVariants)]
	out := make([]EdgeVariant, len(vs))
	for i, v := range vs {
		title := v.Title
		if utf8.RuneCountInString(title) > flashline.MaxTitleLength {
			title = string([]rune(title)[:flashline.MaxTitleLength])
		}
		out[i] = EdgeVariant{SKU: v.SKU, Title: title, Availability: v.Availability()}
	}
	return out
}

// checkVariants refuses a sale's variants out of the bounds edgeVariants
// keeps: more than flashline.MaxVariants, a SKU not of a SKU's form, a
// title longer than a sale's, an availability not one of the three.
func checkVariants(s EdgeSale) error {
	if len(s.Variants) > flashline.MaxVariants {
		return fmt.Errorf("%w: sale %s has %d variants, at most %d", ErrMalformed, s.ID, len(s.Variants), flashline.MaxVariants)
	}
	for _, v := range s.Variants {
		switch {
		case !flashline.ValidVariantSKU(v.SKU):
			return fmt.Errorf("%w: sale %s: a variant's sku is not a sku", ErrMalformed, s.ID)
		case utf8.RuneCountInString(v.Title) > flashline.MaxTitleLength:
			return fmt.Errorf("%w: sale %s: variant %s's title is longer than %d characters", ErrMalformed, s.ID, v.SKU, flashline.MaxTitleLength)
		case v.Availability != flashline.Available && v.Availability != flashline.FewLeft && v.Availability != flashline.SoldOut:
			return fmt.Errorf("%w: sale %s: variant %s's availability %q", ErrMalformed, s.ID, v.SKU, v.Availability)
		}
	}
	return nil
}

// sealedWatermarks is a watermarks document's body as it is published:
// watermarksBody sealed.
type sealedWatermarks struct {
	Sealed []byte `json:"sealed"`
}

// watermarksSealAD is the additional data of a sealed watermarks body (a
// sale's seed has the sale's id, which never looks like this).
const watermarksSealAD = "flashline watermarks"

// OpenWatermarks verifies a watermarks document and returns it with each
// sale's draw seed unsealed (by sale id). Its expiry is the caller's to
// judge.
func (k *Keyring) OpenWatermarks(token string) (Watermarks, map[string][]byte, error) {
	body, env, signer, err := k.openWatermarksBody(token)
	if err != nil {
		return Watermarks{}, nil, fmt.Errorf("open watermarks: %w", err)
	}
	seeds := make(map[string][]byte, len(body.Sales))
	for _, s := range body.Sales {
		if err := checkVariants(s); err != nil {
			return Watermarks{}, nil, fmt.Errorf("open watermarks: %w", err)
		}
		if seeds[s.ID], err = signer.unseal(s.ID, s.SealedSeed); err != nil {
			return Watermarks{}, nil, fmt.Errorf("open watermarks: %w", err)
		}
	}
	return Watermarks{
		IssuedAt:  time.UnixMilli(env.IssuedAt).UTC(),
		ExpiresAt: time.UnixMilli(env.ExpiresAt).UTC(),
		DBNow:     time.UnixMilli(body.DBNow).UTC(),
		Sales:     body.Sales,
	}, seeds, nil
}

// openWatermarksBody verifies a watermarks document and unseals its body.
// A body in the clear (an origin of the version before, which did not seal
// it) is read as it is: it is signed all the same, and edges upgraded first
// keep working during a rolling upgrade.
func (k *Keyring) openWatermarksBody(token string) (watermarksBody, envelope, key, error) {
	var doc struct {
		sealedWatermarks
		watermarksBody
	}
	env, signer, err := k.openDoc(watermarksAudience, token, &doc)
	if err != nil {
		return watermarksBody{}, env, signer, err
	}
	if doc.Sealed == nil {
		return doc.watermarksBody, env, signer, nil
	}
	plain, err := signer.unseal(watermarksSealAD, doc.Sealed)
	if err != nil {
		return watermarksBody{}, env, signer, err
	}
	var body watermarksBody
	if err := json.Unmarshal(plain, &body); err != nil {
		return watermarksBody{}, env, signer, fmt.Errorf("%w: sealed body: %v", ErrMalformed, err)
	}
	return body, env, signer, nil
}

// EdgeReport is what an edge tells every origin on each pull: the pre-open
// tickets it has given out so far, in total, by sale. A report carries
// totals, not what is new since the last one, so one heard twice, or lost,
// changes no count, and an origin that restarts knows every edge's count
// again after one pull.
type EdgeReport struct {
	Edge    string           `json:"edge"`
	Preopen map[string]int64 `json:"preopen"`
	// Run names this run of the edge (new at each start: an edge restarted
	// under the same id counts its lines from nothing again), and Queue is
	// its counts of each sale's line since it started
	// (flashline.QueueCounts, encoded), for the origins to publish as the
	// row of this run of this edge.
	Run   string                     `json:"run,omitempty"`
	Queue map[string]json.RawMessage `json:"queue,omitempty"`
	// Holders are customers the edge gave a pre-open ticket in a
	// randomized_at_open room, by sale, that no origin has said it wrote
	// yet: a batch of them (the edge sends each again until an origin's
	// answer says they were written, so an origin may hear one many
	// times), for the origin to write to the room's holders before the
	// crowd is committed.
	// At most MaxReportedHolders in all.
	Holders map[string][]string `json:"holders,omitempty"`
	// SignedAt is when the edge signed the report, by the database's clock
	// as it knew it (OpenEdgeReport sets it): the same on every origin that
	// hears this report, and later for a later one.
	SignedAt time.Time `json:"-"`
}

// MaxReportedHolders bounds the pre-open holders one edge report carries,
// all sales together: with customer ids of 128 bytes at most, a report
// stays well within what an origin reads.
const MaxReportedHolders = 1024

// EdgeLease asks an origin for the next N positions of Sale's room for Edge
// (one UPDATE for the block, as an instance with the database leases its
// own).
type EdgeLease struct {
	Edge string `json:"edge"`
	Sale string `json:"sale"`
	N    int64  `json:"n"`
}

// LeaseAnswer is an origin's answer to an EdgeLease.
type LeaseAnswer struct {
	First   int64 `json:"first"`
	PreOpen bool  `json:"preOpen"`
}

// CheckEdgeID checks an edge's id: 1-MaxEdgeIDLen bytes of [A-Za-z0-9_-].
func CheckEdgeID(id string) error {
	if id == "" || len(id) > MaxEdgeIDLen || !validAlphabet(id) {
		return fmt.Errorf("%w: edge id must be 1-%d characters of [A-Za-z0-9_-]", ErrMalformed, MaxEdgeIDLen)
	}
	return nil
}

// SignEdgeReport signs an edge's report as of now (the database's clock as
// the edge knows it, by which the origin judges its expiry), good for
// requestTTL.
func (k *Keyring) SignEdgeReport(rep EdgeReport, now time.Time) string {
	return k.signDoc(reportAudience, now, requestTTL, rep)
}

// OpenEdgeReport verifies an edge's signed report, good at now.
func (k *Keyring) OpenEdgeReport(token string, now time.Time) (EdgeReport, error) {
	var rep EdgeReport
	env, err := k.openRequestEnv(reportAudience, token, now, &rep)
	if err != nil {
		return EdgeReport{}, err
	}
	rep.SignedAt = time.UnixMilli(env.IssuedAt)
	return rep, nil
}

// SignEdgeLease signs an edge's request for a lease of positions, as
// SignEdgeReport.
func (k *Keyring) SignEdgeLease(l EdgeLease, now time.Time) string {
	return k.signDoc(leaseAudience, now, requestTTL, l)
}

// OpenEdgeLease verifies an edge's signed request for a lease, good at now.
func (k *Keyring) OpenEdgeLease(token string, now time.Time) (EdgeLease, error) {
	return openRequestOf[EdgeLease](k, leaseAudience, token, now)
}

// openRequestOf is openRequest decoding into a new T.
func openRequestOf[T any](k *Keyring, aud, token string, now time.Time) (T, error) {
	var v T
	err := k.openRequest(aud, token, now, &v)
	return v, err
}

// openRequest verifies an edge's signed request of kind aud, good at now.
func (k *Keyring) openRequest(aud, token string, now time.Time, v any) error {
	_, err := k.openRequestEnv(aud, token, now, v)
	return err
}

// openRequestEnv is openRequest, returning the request's envelope.
func (k *Keyring) openRequestEnv(aud, token string, now time.Time, v any) (envelope, error) {
	env, _, err := k.openDoc(aud, token, v)
	if err != nil {
		return env, err
	}
	if !now.Before(time.UnixMilli(env.ExpiresAt)) || env.ExpiresAt-env.IssuedAt > requestTTL.Milliseconds() {
		return env, fmt.Errorf("%w: request expired or good for too long", ErrMalformed)
	}
	return env, nil
}
