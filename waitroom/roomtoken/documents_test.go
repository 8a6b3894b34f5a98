package roomtoken

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
)

func watermarkSales() []flashline.SaleFacts {
	opens := time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)
	return []flashline.SaleFacts{
		{ID: "sale_1", State: flashline.StateScheduled, OpensAt: &opens, Admission: flashline.AdmissionWaitingRoom,
			Room: flashline.RoomFacts{Fairness: flashline.FairnessRandomizedAtOpen, ChallengeBits: 12, DrawSeed: bytes.Repeat([]byte{7}, 16),
				PreopenCount: -1, PreopenPositions: -1, PreopenTickets: 42, Held: true, Broadcast: "soon", AdmittedThrough: 3, Pace: 1.5}},
		{ID: "sale_direct", State: flashline.StateOpen, Admission: flashline.AdmissionDirect},
	}
}

// TestWatermarksRoundTrip: an edge holding the keys reads back what the
// origin signed, the draw's seed included; a direct sale is left out.
func TestWatermarksRoundTrip(t *testing.T) {
	k := testRing(t, "k1:"+secret1)
	now := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	doc, seeds, err := k.OpenWatermarks(k.SignWatermarks(watermarkSales(), now, now.Add(time.Second)))
	require.NoError(t, err)
	require.Equal(t, now, doc.IssuedAt)
	require.Equal(t, now.Add(WatermarksTTL), doc.ExpiresAt)
	require.Equal(t, now.Add(time.Second), doc.DBNow)
	require.Len(t, doc.Sales, 1)
	s := doc.Sales[0]
	require.Equal(t, "sale_1", s.ID)
	require.Equal(t, int64(42), s.PreopenTickets)
	require.Equal(t, int64(-1), s.PreopenCount)
	require.True(t, s.Held)
	require.Equal(t, "soon", s.Message)
	require.Equal(t, bytes.Repeat([]byte{7}, 16), seeds["sale_1"])
}

// TestWatermarksRevealNoSeed: the document is public; the seed in it is
// sealed, so that before the open nobody without the keys can compute a
// draw.
func TestWatermarksRevealNoSeed(t *testing.T) {
	k := testRing(t, "k1:"+secret1)
	token := k.SignWatermarks(watermarkSales(), time.Now(), time.Now())
	_, payload, _ := strings.Cut(token, ".")
	payload, _, _ = strings.Cut(payload, ".")
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	require.NoError(t, err)
	require.NotContains(t, string(raw), base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 16)))
	require.False(t, bytes.Contains(raw, bytes.Repeat([]byte{7}, 16)))
}

// TestWatermarksNameNoSale: the document is public (GET /edge/watermarks),
// so its body is sealed: whoever does not hold the waiting-room keys learns
// no sale from it, not even one scheduled and not yet announced (its id,
// opening time, the operator's message, the pre-open counts). A document
// of an origin of the version before (its body in the clear, signed) is
// still read.
func TestWatermarksNameNoSale(t *testing.T) {
	k := testRing(t, "k1:"+secret1)
	token := k.SignWatermarks(watermarkSales(), time.Now(), time.Now())
	_, payload, _ := strings.Cut(token, ".")
	payload, _, _ = strings.Cut(payload, ".")
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	require.NoError(t, err)
	for _, secret := range []string{"sale_1", "soon", "2026-12-01", "preopen", "admittedThrough"} {
		require.NotContains(t, string(raw), secret)
	}
	// A sealed body moved to another document kind does not open as one.
	var sealed sealedWatermarks
	_, _, err = k.openDoc(watermarksAudience, token, &sealed)
	require.NoError(t, err)
	_, err = k.keys[0].unseal("sale_1", sealed.Sealed)
	require.ErrorIs(t, err, ErrBadSignature)

	now := time.Now()
	clear := k.signDoc(watermarksAudience, now, WatermarksTTL, watermarksBody{DBNow: now.UnixMilli(),
		Sales: []EdgeSale{{ID: "sale_1", SealedSeed: k.keys[0].seal("sale_1", []byte{1, 2})}}})
	doc, seeds, err := k.OpenWatermarks(clear)
	require.NoError(t, err)
	require.Equal(t, "sale_1", doc.Sales[0].ID)
	require.Equal(t, []byte{1, 2}, seeds["sale_1"])
}

// TestWatermarksRefused: another keyring's document, an altered one, and
// an edge's request presented as a document are all refused.
func TestWatermarksRefused(t *testing.T) {
	k := testRing(t, "k1:"+secret1)
	other := testRing(t, "k2:"+strings.Repeat("x", 32))
	token := k.SignWatermarks(watermarkSales(), time.Now(), time.Now())

	_, _, err := other.OpenWatermarks(token)
	require.ErrorIs(t, err, ErrUnknownKey)
	// Same kid, another secret: the signature fails.
	impostor := testRing(t, "k1:"+strings.Repeat("y", 32))
	_, _, err = impostor.OpenWatermarks(token)
	require.ErrorIs(t, err, ErrBadSignature)
	// One character of the payload changed.
	i := strings.Index(token, ".") + 10
	altered := token[:i] + string(rune('A'+(token[i]-'A'+1)%26)) + token[i+1:]
	_, _, err = k.OpenWatermarks(altered)
	require.Error(t, err)
	// A report is not a document.
	rep := k.signDoc(reportAudience, time.Now(), requestTTL, EdgeReport{Edge: "e1"})
	_, _, err = k.OpenWatermarks(rep)
	require.ErrorIs(t, err, ErrWrongKind)
	// A sealed seed moved to another sale does not open.
	body, _, signer, err := k.openWatermarksBody(token)
	require.NoError(t, err)
	_, err = signer.unseal("sale_2", body.Sales[0].SealedSeed)
	require.ErrorIs(t, err, ErrBadSignature)
}

// TestWatermarksVariants: a sale's variants go through the document as its
// waiters are told of them (sku, title, availability; no count), at most
// flashline.MaxVariants, titles at most a sale's; a document beyond those
// bounds, or with an availability not one of the three, is refused.
func TestWatermarksVariants(t *testing.T) {
	k := testRing(t, "k1:"+secret1)
	now := time.Now()
	sales := watermarkSales()
	for i := range flashline.MaxVariants + 5 {
		sales[0].Variants = append(sales[0].Variants, flashline.VariantFacts{SKU: fmt.Sprintf("V%03d", i), Title: strings.Repeat("é", 200),
			InitialStock: 100, Available: int64(i % 12)})
	}
	doc, _, err := k.OpenWatermarks(k.SignWatermarks(sales, now, now))
	require.NoError(t, err)
	vs := doc.Sales[0].Variants
	require.Len(t, vs, flashline.MaxVariants)
	for i, v := range vs {
		require.Equal(t, fmt.Sprintf("V%03d", i), v.SKU)
		require.Equal(t, strings.Repeat("é", flashline.MaxTitleLength), v.Title)
		require.Equal(t, sales[0].Variants[i].Availability(), v.Availability)
	}
	require.Equal(t, flashline.SoldOut, vs[0].Availability)
	require.Equal(t, flashline.FewLeft, vs[1].Availability)
	require.Equal(t, flashline.Available, vs[11].Availability)

	// Out of bounds: refused, whoever signed it.
	sign := func(v []EdgeVariant) string {
		plain, err := json.Marshal(watermarksBody{DBNow: now.UnixMilli(),
			Sales: []EdgeSale{{ID: "sale_1", SealedSeed: k.keys[0].seal("sale_1", []byte{1}), Variants: v}}})
		require.NoError(t, err)
		return k.signDoc(watermarksAudience, now, WatermarksTTL, sealedWatermarks{Sealed: k.keys[0].seal(watermarksSealAD, plain)})
	}
	_, _, err = k.OpenWatermarks(sign([]EdgeVariant{{SKU: "S", Title: "Small", Availability: flashline.FewLeft}}))
	require.NoError(t, err)
	for _, bad := range [][]EdgeVariant{
		make([]EdgeVariant, flashline.MaxVariants+1),
		{{SKU: "S", Title: strings.Repeat("x", flashline.MaxTitleLength+1), Availability: flashline.Available}},
		{{SKU: "S", Title: "Small", Availability: "12 left"}},
		{{SKU: "-S", Title: "Small", Availability: flashline.Available}},
	} {
		_, _, err = k.OpenWatermarks(sign(bad))
		require.ErrorIs(t, err, ErrMalformed)
	}
}

// TestEdgeRequests: an edge's request is good for requestTTL at most.
func TestEdgeRequests(t *testing.T) {
	k := testRing(t, "k1:"+secret1)
	now := time.Now()
	token := k.signDoc(reportAudience, now, requestTTL, EdgeReport{Edge: "e1", Preopen: map[string]int64{"sale_1": 3}})
	var rep EdgeReport
	require.NoError(t, k.openRequest(reportAudience, token, now.Add(time.Second), &rep))
	require.Equal(t, int64(3), rep.Preopen["sale_1"])
	require.Error(t, k.openRequest(reportAudience, token, now.Add(requestTTL), &rep), "expired")
	long := k.signDoc(reportAudience, now, time.Hour, rep)
	require.Error(t, k.openRequest(reportAudience, long, now, &rep), "good for too long")
	require.ErrorIs(t, k.openRequest(leaseAudience, token, now, &rep), ErrWrongKind)
	_, err := k.OpenEdgeLease(token, now)
	require.ErrorIs(t, err, ErrWrongKind, "a report is no lease")
	rep.Run, rep.Queue = "r1", map[string]json.RawMessage{"sale_1": json.RawMessage(`{"arrivals":2}`)}
	got, err := k.OpenEdgeReport(k.SignEdgeReport(rep, now), now)
	require.NoError(t, err)
	require.Equal(t, now.UnixMilli(), got.SignedAt.UnixMilli(), "the report says when it was signed")
	got.SignedAt = time.Time{}
	require.Equal(t, rep, got)

}

// FuzzOpenDoc: whatever an edge or a network sends an origin, opening it
// never panics, and nothing but a document this keyring signed opens.
func FuzzOpenDoc(f *testing.F) {
	k := testRing(f, "k1:"+secret1)
	f.Add(k.SignWatermarks(watermarkSales(), time.Now(), time.Now()))
	f.Add(k.signDoc(reportAudience, time.Now(), requestTTL, EdgeReport{Edge: "e1"}))
	f.Add("a.b.c")
	f.Add("")
	f.Fuzz(func(t *testing.T, token string) {
		var rep EdgeReport
		if err := k.openRequest(reportAudience, token, time.Now(), &rep); err == nil {
			require.NoError(t, CheckEdgeID(rep.Edge), "a report signed here")
		}
		_, _, _ = k.OpenWatermarks(token)
		// Signed with the fuzz key: the envelope's decoding is fuzzed too.
		signed := k.keys[0].sign([]byte(token))
		_, _, _ = k.OpenWatermarks(signed)
		_ = k.openRequest(leaseAudience, signed, time.Now(), &EdgeLease{})
	})
}
