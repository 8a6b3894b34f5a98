package worker

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	flashline "github.com/flashline/flashline"
	"github.com/flashline/flashline/auth"
	"github.com/flashline/flashline/internal/testkit/testserver"
	"github.com/flashline/flashline/waitroom"
	"github.com/flashline/flashline/waitroom/edge"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

// The repository tests the waiting page's JavaScript in a browser (the
// waitpage package's browser tests) and has no JavaScript test runner or
// linter of its own; the Worker's modules are unit-tested here on workerd,
// the runtime they run on, each function against the Go code it follows.

// modules is the Worker's modules on workerd behind testdata/modules.js:
// call runs one exported function on each case (its arguments) and returns
// what it returned, in JSON.
type modules struct {
	t    *testing.T
	base string
}

func startModules(t *testing.T) modules {
	t.Helper()
	workerdBinary(t)
	return modules{t: t, base: serveStaged(t, stageWorker(t, "modules.js", map[string]string{"modules.js": ""}))}
}

func (m modules) call(fn string, cases ...[]any) []json.RawMessage {
	m.t.Helper()
	body, err := json.Marshal(map[string]any{"fn": fn, "cases": cases})
	require.NoError(m.t, err)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, m.base+"/", bytes.NewReader(body))
	require.NoError(m.t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(m.t, err)
	defer resp.Body.Close()
	var out struct {
		Results []json.RawMessage
		Error   string
	}
	require.NoError(m.t, json.NewDecoder(resp.Body).Decode(&out))
	require.Equal(m.t, http.StatusOK, resp.StatusCode, out.Error)
	require.Len(m.t, out.Results, len(cases), fn)
	return out.Results
}

// str is a result that is a JSON string.
func str(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	require.NoError(t, json.Unmarshal(raw, &s), "%s", raw)
	return s
}

// jsTicket is a ticket as modules.js takes and gives it.
type jsTicket struct {
	SaleID     string `json:"saleID"`
	CustomerID string `json:"customerID"`
	ArrivedAt  int64  `json:"arrivedAt"`
	Position   int64  `json:"position"`
	PreOpen    bool   `json:"preOpen"`
	Draw       string `json:"draw"`
}

func toJS(tk roomtoken.Ticket) jsTicket {
	return jsTicket{tk.SaleID, tk.CustomerID, tk.ArrivedAt.Unix(), tk.Position, tk.PreOpen, strconv.FormatUint(tk.Draw, 10)}
}

// awkward are ids and texts whose JSON differs between careless encoders.
var awkward = []string{"worker-001", "wörker-ü", "<b>&amp;</b>", "line\u2028para\u2029", "quote\"back\\slash",
	"\t\n\r\b\f", "ctl\u0001\u001f\u007f", "emoji 😀", "日本語", "'single'", "slash/"}

// TestWorkerModules: the Worker's functions give what the Go code they
// follow gives, case by case: JSON strings as encoding/json writes them,
// base64url, the draw and its rank, tickets signed and read, the admission
// id, the challenge's nonce and its check, the customer a token names (as
// auth's fast path decides it), a ticket's rank in a room, when its page
// began asking and an isolate's counts of a line's returns.
func TestWorkerModules(t *testing.T) {
	m := startModules(t)
	keys, err := roomtoken.ParseKeyring(testserver.WaitroomKeys)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(51, 51))

	t.Run("jsonString", func(t *testing.T) {
		var cases [][]any
		for _, s := range awkward {
			cases = append(cases, []any{s, false}, []any{s, true})
		}
		for i, r := range m.call("jsonString", cases...) {
			s, html := cases[i][0].(string), cases[i][1].(bool)
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(html)
			require.NoError(t, enc.Encode(s))
			require.Equal(t, strings.TrimSuffix(want.String(), "\n"), str(t, r), "%q, html %v", s, html)
		}
	})

	t.Run("b64url", func(t *testing.T) {
		var cases [][]any
		var in [][]byte
		for n := range 34 {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(rng.UintN(256))
			}
			in = append(in, b)
			cases = append(cases, []any{base64.StdEncoding.EncodeToString(b)})
		}
		for i, r := range m.call("b64url", cases...) {
			require.Equal(t, base64.RawURLEncoding.EncodeToString(in[i]), str(t, r))
		}
	})

	t.Run("draw", func(t *testing.T) {
		var cases [][]any
		var want []uint64
		for i := range 40 {
			seed := make([]byte, 32)
			for j := range seed {
				seed[j] = byte(rng.UintN(256))
			}
			sale, customer := "sale_"+strconv.Itoa(i), awkward[i%len(awkward)]+strconv.Itoa(i)
			cases = append(cases, []any{base64.StdEncoding.EncodeToString(seed), sale, customer})
			want = append(want, flashline.Draw(seed, sale, customer))
		}
		for i, r := range m.call("draw", cases...) {
			require.Equal(t, strconv.FormatUint(want[i], 10), str(t, r), "case %d", i)
		}
		cases = cases[:0]
		var draws []uint64
		var counts []int64
		for _, d := range []uint64{0, 1, 1 << 63, math.MaxUint64, math.MaxUint64 - 1, rng.Uint64(), rng.Uint64()} {
			for _, n := range []int64{0, 1, 2, 3, 10000, 2_000_000, 1 << 40} {
				draws, counts = append(draws, d), append(counts, n)
				cases = append(cases, []any{strconv.FormatUint(d, 10), n})
			}
		}
		for i, r := range m.call("drawRank", cases...) {
			require.JSONEq(t, strconv.FormatInt(flashline.DrawRank(draws[i], counts[i]), 10), string(r), "draw %d, crowd %d", draws[i], counts[i])
		}
	})

	// Tickets of every kind: ids that are awkward in JSON, pre-open or not,
	// large draws.
	arrived := time.Now().Truncate(time.Second)
	var tickets []roomtoken.Ticket
	for i, id := range awkward {
		if strings.ContainsAny(id, "\t\n\r\b\f\u0001\u001f\u007f") {
			continue // not an id a ticket may carry
		}
		tickets = append(tickets, roomtoken.Ticket{SaleID: "sale_01JTESTTESTTESTTESTTESTTES", CustomerID: id, ArrivedAt: arrived.Add(-time.Duration(i) * time.Minute),
			Position: int64(i + 1), PreOpen: i%2 == 0, Draw: rng.Uint64()})
	}
	tickets = append(tickets, roomtoken.Ticket{SaleID: "sale_x", CustomerID: "max", ArrivedAt: arrived, Position: 1 << 52, PreOpen: true, Draw: math.MaxUint64})

	t.Run("tickets", func(t *testing.T) {
		var sign, parse, ids, nonces [][]any
		for _, tk := range tickets {
			token := keys.SignTicket(tk)
			sign = append(sign, []any{toJS(tk)})
			parse = append(parse, []any{token, time.Now().Unix()})
			ids = append(ids, []any{toJS(tk)})
			nonces = append(nonces, []any{toJS(tk)})
		}
		for i, r := range m.call("signTicket", sign...) {
			require.Equal(t, keys.SignTicket(tickets[i]), str(t, r), "ticket %d signed byte for byte as roomtoken signs it", i)
		}
		for i, r := range m.call("parseTicket", parse...) {
			var got jsTicket
			require.NoError(t, json.Unmarshal(r, &got), "%s", r)
			require.Equal(t, toJS(tickets[i]), got, "ticket %d read", i)
		}
		for i, r := range m.call("admissionID", ids...) {
			require.Equal(t, roomtoken.AdmissionID(tickets[i]), str(t, r), "ticket %d's admission id", i)
		}
		for i, r := range m.call("challengeNonce", nonces...) {
			require.Equal(t, keys.ChallengeNonce(tickets[i]), str(t, r), "ticket %d's nonce", i)
		}
		// Refused: expired by the clock given, tampered with, signed with
		// another key, not a token.
		tk := tickets[0]
		token := keys.SignTicket(tk)
		other, err := roomtoken.ParseKeyring("o1:another-waitroom-key-0123456789abcdef")
		require.NoError(t, err)
		refused := [][]any{
			{token, tk.ArrivedAt.Add(roomtoken.TicketTTL).Unix()},
			{token[:len(token)-2] + "AA", time.Now().Unix()},
			{other.SignTicket(tk), time.Now().Unix()},
			{"", time.Now().Unix()},
			{"a.b.c", time.Now().Unix()},
		}
		for i, r := range m.call("parseTicket", refused...) {
			require.Equal(t, "null", string(r), "refused case %d", i)
		}
	})

	t.Run("challenge", func(t *testing.T) {
		var cases [][]any
		var want []bool
		for i, tk := range tickets[:4] {
			bits := 4 + i
			nonce := keys.ChallengeNonce(tk)
			good, bad := roomtoken.Solve(nonce, bits), wrongSolution(nonce, bits)
			for _, c := range []struct {
				solution string
				bits     int
			}{{good, bits}, {bad, bits}, {bad, 0}, {"0" + good, bits}, {"", bits}, {"-1", bits}, {good, 300}} {
				cases = append(cases, []any{toJS(tk), c.solution, c.bits})
				want = append(want, keys.VerifyChallenge(tk, c.solution, c.bits))
			}
		}
		for i, r := range m.call("verifyChallenge", cases...) {
			require.JSONEq(t, strconv.FormatBool(want[i]), string(r), "case %d: %v", i, cases[i][1:])
		}
	})

	t.Run("customerOf", func(t *testing.T) {
		v, err := auth.NewVerifier(testserver.JWTSecret, testserver.AdminToken)
		require.NoError(t, err)
		now := time.Now()
		hs := func(method jwt.SigningMethod, secret string, claims jwt.MapClaims) string {
			tok, err := jwt.NewWithClaims(method, claims).SignedString([]byte(secret))
			require.NoError(t, err)
			return tok
		}
		claims := func(sub any, exp int64, more ...any) jwt.MapClaims {
			c := jwt.MapClaims{"sub": sub, "exp": exp}
			for i := 0; i+1 < len(more); i += 2 {
				c[more[i].(string)] = more[i+1]
			}
			return c
		}
		instrument, err := auth.MintInstrument(testserver.JWTSecret, "with-card", time.Hour, time.Time{}, "card_1")
		require.NoError(t, err)
		exp := now.Add(time.Hour).Unix()
		tokens := []string{
			testserver.Token(t, "cust-1"),
			testserver.Token(t, "wörker-ü"),
			testserver.Token(t, "<b>&</b>"),
			hs(jwt.SigningMethodHS256, testserver.JWTSecret, claims("expired", now.Add(-time.Minute).Unix())),
			hs(jwt.SigningMethodHS256, testserver.JWTSecret, claims("in-leeway", now.Add(-2*time.Second).Unix())),
			hs(jwt.SigningMethodHS256, testserver.JWTSecret, claims("future-iat", exp, "iat", now.Add(time.Minute).Unix())),
			hs(jwt.SigningMethodHS256, testserver.JWTSecret, claims("future-nbf", exp, "nbf", now.Add(time.Minute).Unix())),
			hs(jwt.SigningMethodHS256, testserver.JWTSecret, claims("past-nbf", exp, "nbf", now.Add(-time.Minute).Unix())),
			hs(jwt.SigningMethodHS256, "another-jwt-secret-0123456789abcdef", claims("wrong-secret", exp)),
			hs(jwt.SigningMethodHS384, testserver.JWTSecret, claims("hs384", exp)),
			hs(jwt.SigningMethodHS256, testserver.JWTSecret, claims("", exp)),
			hs(jwt.SigningMethodHS256, testserver.JWTSecret, claims(strings.Repeat("é", 128), exp)),
			hs(jwt.SigningMethodHS256, testserver.JWTSecret, claims(strings.Repeat("é", 129), exp)),
			hs(jwt.SigningMethodHS256, testserver.JWTSecret, claims("ctl\u0001", exp)),
			hs(jwt.SigningMethodHS256, testserver.JWTSecret, claims(42, exp)),
			hs(jwt.SigningMethodHS256, testserver.JWTSecret, claims("float-exp", 0, "exp", float64(exp)+0.5)),
			hs(jwt.SigningMethodHS256, testserver.JWTSecret, claims("no-exp", 0, "exp", nil)),
			hs(jwt.SigningMethodHS256, testserver.JWTSecret, claims("acct", exp, "acct_created", now.Add(-time.Hour).Unix())),
			instrument,
			"not.a.token",
		}
		var cases [][]any
		for _, tok := range tokens {
			cases = append(cases, []any{"Bearer " + tok, now.Unix()})
		}
		var s auth.Scratch
		for i, r := range m.call("customerOf", cases...) {
			id, ok := v.FastCustomer(tokens[i], &s, time.Unix(now.Unix(), 0))
			want := "null"
			if ok {
				b, err := json.Marshal(id)
				require.NoError(t, err)
				want = string(b)
			}
			require.JSONEq(t, want, string(r), "token %d decided as auth's fast path decides it", i)
		}
	})

	t.Run("rank", func(t *testing.T) {
		type jsSale struct {
			Fairness         string `json:"fairness"`
			PreopenCount     int64  `json:"preopenCount"`
			PreopenPositions int64  `json:"preopenPositions"`
			PreopenTickets   int64  `json:"preopenTickets"`
		}
		var cases [][]any
		var want []int64
		for _, fairness := range []string{"randomized_at_open", "arrival_order"} {
			for _, s := range []jsSale{{fairness, -1, -1, 0}, {fairness, -1, -1, 7}, {fairness, 10000, 10002, 10000}, {fairness, 3, 2, 3}} {
				for _, tk := range tickets {
					cases = append(cases, []any{s, toJS(tk)})
					count, positions := s.PreopenCount, s.PreopenPositions
					if count < 0 {
						count = max(s.PreopenTickets, 1)
					}
					want = append(want, waitroom.RankIn(tk, flashline.Fairness(fairness), count, positions, nil))
				}
			}
		}
		for i, r := range m.call("rank", cases...) {
			require.JSONEq(t, strconv.FormatInt(want[i], 10), string(r), "case %d: %+v", i, cases[i])
		}
	})

	t.Run("customerOrigin", func(t *testing.T) {
		// Authorization headers (ASCII) of real tokens and of random
		// printable bytes, spread over 1-5 origins as the Go edge does.
		var cases [][]any
		var want []int
		rng := rand.New(rand.NewPCG(51, 2))
		for i := range 200 {
			key := "Bearer " + testserver.Token(t, "spread-"+strconv.Itoa(i))
			if i%2 == 1 {
				b := make([]byte, rng.IntN(400))
				for j := range b {
					b[j] = byte(0x20 + rng.IntN(0x5f))
				}
				key = string(b)
			}
			for n := 1; n <= 5; n++ {
				cases = append(cases, []any{key, n})
				want = append(want, edge.CustomerOrigin(key, n))
			}
		}
		for i, r := range m.call("customerOrigin", cases...) {
			require.JSONEq(t, strconv.Itoa(want[i]), string(r), "case %d: %q over %v", i, cases[i][0], cases[i][1])
		}
	})

	t.Run("lines", func(t *testing.T) {
		hour := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
		opens := hour.Add(10 * time.Minute)
		type jsSale struct {
			OpensAtMs *int64 `json:"opensAtMs"`
		}
		opensMs := opens.UnixMilli()
		drawn := roomtoken.Ticket{SaleID: "s", CustomerID: "d", ArrivedAt: hour, Position: 1, PreOpen: true, Draw: 42}
		placed := roomtoken.Ticket{SaleID: "s", CustomerID: "p", ArrivedAt: hour.Add(time.Minute), Position: 3, PreOpen: true}
		// waitroom's asksFrom: the opening time for a ticket placed by the
		// draw (none known without one), the arrival for any other.
		want := []string{strconv.FormatInt(opensMs, 10), "null", strconv.FormatInt(placed.ArrivedAt.UnixMilli(), 10)}
		for i, r := range m.call("asksFrom", []any{jsSale{&opensMs}, toJS(drawn)}, []any{jsSale{}, toJS(drawn)}, []any{jsSale{&opensMs}, toJS(placed)}) {
			require.JSONEq(t, want[i], string(r), "case %d", i)
		}

		// As TestQueueReturns and TestQueueLeftFleetWide: a return the first
		// time a waiter is heard more than ReturnAfter after its page began
		// asking, whatever it is told (a page asking from an unknown time:
		// never); sold out for now keeps a waiter followed, not active.
		after := waitroom.ReturnAfter.Milliseconds()
		steps := []any{
			[]any{1000, "first", "waiting", 1000, 1000},
			[]any{after, "first", "waiting", after, after},
			[]any{after + 1000, "late", "waiting", after + 1000, after + 1000},
			[]any{after + 2000, "late", "waiting", after + 2000, after + 2000},
			[]any{60000, "admitted", "admitted", 60000, 60000},
			[]any{60000, "sold", "sold_out", 60000, 60000},
			[]any{60500, "sold", "sold_out", 60500, 60500}, // asked again: its time in line ended, no return
			[]any{61500, "sold", "sold_out", 61500, 61500},
			[]any{60000, "unknown", "waiting", 60000, nil},
			[]any{61000, "for-now", "waiting", 1000, 1000},
			[]any{62000, "for-now", "sold_out_for_now", 2000, 2000},
			[]any{63000},
		}
		r := m.call("lines", []any{steps})
		var q map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(str(t, r[0])), &q))
		c, err := flashline.DecodeQueueCounts(q["s"])
		require.NoError(t, err, "%s", q["s"])
		require.EqualValues(t, 3, c.Returns, "late, admitted, sold (once, though asked thrice): %s", q["s"])
		require.EqualValues(t, 3, c.Active, "first, late and unknown (for-now sold out for now): %s", q["s"])
		require.Zero(t, c.Left)
		// A minute on: all gone quiet but the admitted one; one back.
		steps = append(steps, []any{125000}, []any{130000, "first", "waiting", 130000, 130000}, []any{131000})
		r = m.call("lines", []any{steps})
		require.NoError(t, json.Unmarshal([]byte(str(t, r[0])), &q))
		c, err = flashline.DecodeQueueCounts(q["s"])
		require.NoError(t, err, "%s", q["s"])
		require.EqualValues(t, 4, c.Returns, "and first, back: %s", q["s"])
		require.EqualValues(t, 4, c.Left, "first, late, unknown, for-now: %s", q["s"])
		require.EqualValues(t, 1, c.Active)
	})
}
