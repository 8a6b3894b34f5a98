package handlers

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/api"
	"github.com/flashline/flashline/internal/assets"
)

// GET /sales/{saleId}/draw is public and, for a sale of a million
// registrants or holders, costs seconds of CPU, the whole list read from
// the database and hundreds of MB to build (docs/measured.md). So:
//
//   - a final transcript (a lottery drawn, a crowd ranked: neither changes
//     after that) is built once per instance and its bytes, with their gzip
//     and ETag, kept in a cache bounded in bytes (least recently used out);
//   - requests for a sale whose build is under way wait for that build
//     (singleflight), each for as long as its own request lasts; the build
//     itself runs detached from the request that started it (bounded by
//     DrawBuildTimeout), so a client that leaves wastes nothing;
//   - a transcript that is not final yet is never cached: a request that
//     joined a build started before it arrived and got a non-final answer
//     waits for the next build instead, so an answer never predates its
//     request; builds of one sale are one at a time, and DrawBuildSlots
//     builds run at once in all.

// DrawCacheBytes bounds the bytes of the final transcripts one instance
// keeps (each its JSON and its gzip). A transcript larger than it alone is
// not kept: served from its build, every build one at a time.
const DrawCacheBytes = 256 << 20

// DrawBuildSlots is how many transcripts an instance builds at once, all
// sales together: the memory a build takes, times this, is the most the
// route ever holds beside the cache.
const DrawBuildSlots = 2

// DrawBuildTimeout bounds one build (the database reads included).
const DrawBuildTimeout = 2 * time.Minute

// drawDoc is one built answer: a transcript's bytes (final or not), or the
// error to answer.
type drawDoc struct {
	final   bool
	noStore bool
	body    []byte
	gz      []byte // body gzipped (final only)
	etag    string // strong, of body; gzip's is etag with "-gzip" inside the quotes
	err     error
	// started is when its build began: an answer not final is no answer
	// to a request made after that.
	started time.Time
}

func (d *drawDoc) size() int64 { return int64(len(d.body) + len(d.gz)) }

// drawTranscripts serves GET /sales/{saleId}/draw.
type drawTranscripts struct {
	store    flashline.LotteryStore
	logger   *slog.Logger
	maxBytes int64
	flights  singleflight.Group
	slots    chan struct{}
	builds   *prometheus.CounterVec

	mu    sync.Mutex
	lru   *list.List // of *drawEntry, most recently used first
	byID  map[string]*list.Element
	bytes int64
}

type drawEntry struct {
	saleID string
	doc    *drawDoc
}

func newDrawTranscripts(store flashline.LotteryStore, reg prometheus.Registerer, maxBytes int64, logger *slog.Logger) *drawTranscripts {
	d := &drawTranscripts{store: store, logger: logger, maxBytes: maxBytes, slots: make(chan struct{}, DrawBuildSlots),
		lru: list.New(), byID: map[string]*list.Element{},
		builds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashline_draw_transcript_builds_total",
			Help: "Draw transcripts (GET /sales/{id}/draw) built from the database, by whether the transcript was final (then kept).",
		}, []string{"final"}),
	}
	if reg != nil {
		reg.MustRegister(d.builds)
	}
	return d
}

// handle is GET /sales/{saleId}/draw: the lottery's draw transcript
// (api.DrawTranscript), or a randomized_at_open room's crowd's, no
// authentication. Once final it does not change, and may be cached.
func (d *drawTranscripts) handle(c *gin.Context) {
	ctx, saleID := c.Request.Context(), c.Param("saleId")
	doc := d.cached(saleID)
	if doc == nil {
		asked := time.Now()
		var err error
		if doc, err = d.wait(ctx, saleID); err == nil && !doc.final && doc.started.Before(asked) {
			// Not final, and built from before this request arrived (it
			// joined a build under way): the next build starts after the
			// one it joined ended, so after the request arrived.
			doc, err = d.wait(ctx, saleID)
		}
		if err != nil {
			writeError(c, d.logger, err)
			return
		}
	}
	if doc.err != nil {
		writeError(c, d.logger, doc.err)
		return
	}
	h := c.Writer.Header()
	if !doc.final {
		h.Set("Cache-Control", "no-store")
		writeRaw(c, http.StatusOK, doc.body)
		return
	}
	h.Set("Cache-Control", "public, max-age=3600")
	h.Set("Vary", "Accept-Encoding")
	body, etag := doc.body, doc.etag
	if assets.AcceptsGzip(c.Request.Header.Get("Accept-Encoding")) {
		body, etag = doc.gz, strings.TrimSuffix(doc.etag, `"`)+`-gzip"`
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("ETag", etag)
	if inm := c.Request.Header.Get("If-None-Match"); inm != "" && etagMatches(inm, doc.etag) {
		c.Set(outcomeKey, "ok")
		h.Del("Content-Encoding")
		c.Status(http.StatusNotModified)
		return
	}
	writeRaw(c, http.StatusOK, body)
}

// wait joins saleID's build under way, or starts one, and waits for it as
// long as ctx lasts.
func (d *drawTranscripts) wait(ctx context.Context, saleID string) (*drawDoc, error) {
	ch := d.flights.DoChan(saleID, func() (any, error) {
		started := time.Now()
		if doc := d.cached(saleID); doc != nil {
			return doc, nil // built by the flight that just ended
		}
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DrawBuildTimeout)
		defer cancel()
		select {
		case d.slots <- struct{}{}:
		case <-bctx.Done():
			return nil, bctx.Err()
		}
		defer func() { <-d.slots }()
		doc := d.build(bctx, saleID)
		doc.started = started
		d.builds.WithLabelValues(map[bool]string{true: "true", false: "false"}[doc.final]).Inc()
		if doc.final {
			d.keep(saleID, doc)
		}
		return doc, nil
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*drawDoc), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// build reads and encodes saleID's transcript.
func (d *drawTranscripts) build(ctx context.Context, saleID string) *drawDoc {
	v, final, err := d.transcript(ctx, saleID)
	if err != nil {
		return &drawDoc{err: err}
	}
	body, err := json.Marshal(v)
	if err != nil {
		return &drawDoc{err: err}
	}
	doc := &drawDoc{final: final, body: body}
	if final {
		sum := sha256.Sum256(body)
		doc.etag = `"` + hex.EncodeToString(sum[:16]) + `"`
		doc.gz = assets.GzipBytes(body)
	}
	return doc
}

// transcript is saleID's transcript, and whether it is final: a lottery
// drawn, a crowd ranked.
func (d *drawTranscripts) transcript(ctx context.Context, saleID string) (api.DrawTranscript, bool, error) {
	l, err := d.store.Lottery(ctx, saleID)
	if errors.Is(err, flashline.ErrNoLottery) {
		return d.crowdTranscript(ctx, saleID)
	}
	if err != nil {
		return api.DrawTranscript{}, false, err
	}
	if l.DrawVersion < 2 {
		return api.DrawTranscript{}, false, flashline.Invalid("this lottery was drawn before draw transcripts existed: its policy's seed and commitment are what it published")
	}
	var entries []flashline.LotteryEntry
	if l.RegistrantsRoot != nil {
		// Read after the lottery's row: drawn there, the ranks here are
		// the draw's (written in its transaction).
		if entries, err = d.store.LotteryEntries(ctx, saleID); err != nil {
			return api.DrawTranscript{}, false, err
		}
	}
	return api.NewDrawTranscript(l, flashline.NewDrawTranscript(l, entries)), l.DrawnAt != nil, nil
}

// crowdTranscript is a randomized_at_open waiting room's: its pre-open
// crowd as committed at the open, in the lottery's transcript's shape
// (api.NewCrowdTranscript), final once ranked (its final seed stored with
// the beacon's round, in one statement). Any other sale: no_lottery.
func (d *drawTranscripts) crowdTranscript(ctx context.Context, saleID string) (api.DrawTranscript, bool, error) {
	crowd, err := d.store.Crowd(ctx, saleID)
	switch {
	case errors.Is(err, flashline.ErrNoWaitingRoom):
		return api.DrawTranscript{}, false, flashline.ErrNoLottery
	case err != nil:
		return api.DrawTranscript{}, false, err
	case crowd.Fairness != flashline.FairnessRandomizedAtOpen:
		return api.DrawTranscript{}, false, flashline.ErrNoLottery
	}
	final := crowd.FinalSeed != nil && crowd.Root != nil
	return api.NewCrowdTranscript(crowd, flashline.NewCrowdTranscript(crowd)), final, nil
}

// cached is saleID's final transcript if kept, now the most recently used.
func (d *drawTranscripts) cached(saleID string) *drawDoc {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.byID[saleID]
	if !ok {
		return nil
	}
	d.lru.MoveToFront(e)
	return e.Value.(*drawEntry).doc
}

// keep caches saleID's final transcript, the least recently used out until
// it fits (one larger than the whole cache is not kept).
func (d *drawTranscripts) keep(saleID string, doc *drawDoc) {
	if doc.size() > d.maxBytes {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.byID[saleID]; ok {
		return
	}
	for d.bytes+doc.size() > d.maxBytes {
		old := d.lru.Back()
		oe := old.Value.(*drawEntry)
		d.lru.Remove(old)
		delete(d.byID, oe.saleID)
		d.bytes -= oe.doc.size()
	}
	d.byID[saleID] = d.lru.PushFront(&drawEntry{saleID: saleID, doc: doc})
	d.bytes += doc.size()
}

// etagMatches reports whether an If-None-Match header names etag (or its
// gzip's), weakly compared (RFC 9110: W/ ignored), or is "*".
func etagMatches(header, etag string) bool {
	gz := strings.TrimSuffix(etag, `"`) + `-gzip"`
	for part := range strings.SplitSeq(header, ",") {
		t := strings.TrimPrefix(strings.TrimSpace(part), "W/")
		if t == "*" || t == etag || t == gz {
			return true
		}
	}
	return false
}
