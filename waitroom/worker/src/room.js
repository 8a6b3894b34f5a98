// The waiting room's answers from the watermarks document, as package
// waitroom's Room gives them from memory on the Go edge (place.go,
// status.go, admitted.go): a ticket given back or placed by the draw
// before the open, and a status poll. Each returns {status, body,
// retryAfter?} for the Worker to write, or null: not decided here, and the
// request goes on to an origin, as the Go edge's door leaves it to its
// routes.

import {
  ADMISSION_TTL_S, admissionID, challengeNonce, crowdDraw, draw, drawRank, jsonString,
  parseTicket, signAdmission, signTicket, validID, verifyChallenge,
} from "./tokens.js";

const ASSUMED_PACE = 10;
const OUTSTANDING_FACTOR = 2;
const OUTSTANDING_FLOOR = 8;
const SOLD_OUT_POLL_MS = 5000;
const BEYOND_POLL_BUDGET = 2000;
const BEYOND_POLL_FLOOR_MS = 3000;

const jitter = (ms) => Math.round(ms * (0.7 + 0.6 * Math.random()));

// opened is SaleFacts.Opened at now (ms).
function opened(s, now) {
  return s.opensAtMs === null ? s.state !== "scheduled" : s.opensAtMs <= now;
}

// drawn: t is placed by the draw in s's room.
const drawn = (s, t) => t.preOpen && s.fairness === "randomized_at_open";

// committed: s's pre-open crowd is frozen and committed (the document names
// its final seed), which ranks a drawn ticket by the crowd's draw
// (flashline.CrowdRank under the final seed), not by its own.
const committed = (s, t) => drawn(s, t) && s.preopenCount >= 0 && !!s.finalSeedBytes;

// ranked is t, its crowd's draw set when s's crowd is committed (rank
// ranks it by that), as waitroom's RankIn.
async function ranked(s, t) {
  if (committed(s, t)) t.crowdDraw = await crowdDraw(s.finalSeedBytes, t.saleID, t.customerID);
  return t;
}

// crowd is the pre-open crowd: as frozen, or the tickets counted so far.
// asksFrom is waitroom's asksFrom: when ticket t's page began asking for its
// status (ms), for the line's returns: its arrival, but for a ticket placed
// by the draw before the open (arrived at the start of the hour) the
// opening time, and null when the sale has none.
export function asksFrom(s, t) {
  if (!t.preOpen || BigInt(t.draw) === 0n) return t.arrivedAt * 1000;
  return s.opensAtMs === null ? null : Math.max(t.arrivedAt * 1000, s.opensAtMs);
}

const crowd = (s) => (s.preopenCount >= 0 ? s.preopenCount : Math.max(s.preopenTickets, 1));

export function rank(s, t) {
  if (drawn(s, t) && t.crowdDraw !== undefined) return drawRank(t.crowdDraw, s.preopenCount);
  if (drawn(s, t)) return drawRank(t.draw, crowd(s));
  if (s.preopenCount >= 0 && s.preopenPositions >= 0 && t.position > s.preopenPositions) {
    return s.preopenCount + t.position - s.preopenPositions;
  }
  return t.position;
}

function placeRange(distance, n) {
  if (n <= 1 || distance <= 1) return [1, 1];
  const f = Math.min((distance - 1) / n, 1);
  const mean = (n - 1) * f;
  const sd = Math.sqrt((n - 1) * f * (1 - f));
  const low = 1 + Math.max(Math.floor(mean - 0.6745 * sd), 0);
  const high = 1 + Math.ceil(mean + 0.6745 * sd);
  return [low, Math.max(high, low)];
}

// wait is Room.wait: the place, its range, the estimate and when to ask again.
function wait(s, t, now) {
  const distance = Math.max(rank(s, t) - s.admittedThrough, 1);
  const pace = s.pace > 0 ? s.pace : ASSUMED_PACE;
  let secs = Math.ceil(distance / pace) * 1.5;
  if (s.opensAtMs !== null && s.opensAtMs > now) secs += Math.ceil((s.opensAtMs - now) / 1000);
  const e = { position: distance, low: 0, high: 0, seconds: Math.ceil(secs) };
  if (drawn(s, t)) [e.low, e.high] = placeRange(distance, crowd(s));
  e.pollAfter = pollAfter(s, distance, secs, now);
  return e;
}

function pollAfter(s, distance, secs, now) {
  let base = distance <= 1 ? 1000 : Math.min(Math.max((secs * 1000) / 5, 1000), 15000);
  const untilOpen = s.opensAtMs !== null && s.opensAtMs > now ? s.opensAtMs - now : 0;
  const reach = OUTSTANDING_FACTOR * s.available + OUTSTANDING_FLOOR;
  if (!s.soldOut && distance <= reach) {
    if (untilOpen === 0) base = 1000;
    let d = jitter(base);
    if (untilOpen > 0 && untilOpen < d) d = untilOpen + 300 + Math.floor(Math.random() * 1000);
    return Math.round(d);
  }
  let d = jitter(base);
  if (!s.soldOut) {
    const beyond = Math.max(((distance - reach) / BEYOND_POLL_BUDGET) * 1000, BEYOND_POLL_FLOOR_MS);
    d = Math.min(d, untilOpen + jitter(beyond));
  }
  return Math.round(d);
}

const range = (low, high) => (low === 0 && high === 0 ? "" : `,"positionRange":{"p25":${low},"p75":${high}}`);
const challengeJSON = (c) => `{"nonce":${jsonString(c.nonce, true)},"bits":${c.bits}}`;

export class Room {
  constructor(keyring, origins) {
    this.keyring = keyring;
    this.origins = origins;
    this.marks = new Map(); // sale id → {marks: [{at, watermark}], stopped}
  }

  // placedByDraw is Room.placedByDraw, by the database's clock.
  placedByDraw(s) {
    return s.fairness === "randomized_at_open" && s.preopenCount < 0 && !opened(s, this.origins.dbNow());
  }

  async ticketBody(s, t, token, now) {
    const w = wait(s, t, now);
    let challenge = "null";
    if (s.challengeBits > 0) challenge = challengeJSON({ nonce: await challengeNonce(this.keyring.signer, t), bits: s.challengeBits });
    return `{"token":${jsonString(token, true)},"position":${w.position}${range(w.low, w.high)},"estimatedWaitSeconds":${w.seconds},` +
      `"pollAfterMs":${w.pollAfter},"policy":${jsonString(s.fairness, true)},"challenge":${challenge}}`;
  }

  // ticket is GET /sales/{id}/ticket for customer (previous: the ticket
  // held, "" none): Room.TicketFromMemory, and, on a sale known but stale,
  // Room.Ticket's fail-closed answer (503 sale_paused_fail_closed) unless
  // the ticket is placed by the draw alone before the opening time.
  async ticket(saleID, customer, previous, ctx) {
    const known = this.origins.sale(saleID);
    if (!known) return null;
    const { s, fresh } = known;
    const now = this.origins.dbNow();
    const drawnBefore = s.fairness === "randomized_at_open" && s.state === "scheduled" && s.opensAtMs !== null && s.opensAtMs > now;
    if (!fresh && !drawnBefore) return unavailable();
    if (s.state === "closed" || s.minAccountAgeSeconds > 0) return null;
    if (previous !== "") {
      const t = await parseTicket(this.keyring, previous, now / 1000);
      if (t && t.saleID === saleID && t.customerID === customer) {
        return { status: 200, body: await this.ticketBody(s, await ranked(s, t), previous, now) };
      }
    }
    // A customer id longer than a ticket takes (128 bytes) is the
    // origin's to refuse, as TicketFromMemory leaves it to Ticket.
    if (s.soldOut || !validID(customer) || !this.placedByDraw(s)) return null;
    const d = await draw(s.seed, saleID, customer);
    this.origins.count(saleID, d, customer, ctx);
    // Placed by its draw alone: position 1, arrived at the start of the hour
    // (drawnTicket), so asking again within the hour gives the same token.
    const t = { saleID, customerID: customer, arrivedAt: Math.floor(now / 3600000) * 3600, position: 1, preOpen: true, draw: d };
    return { status: 200, body: await this.ticketBody(s, t, await signTicket(this.keyring, t), now) };
  }

  // status is GET /sales/{id}/status: Room.Status from the document. An
  // answer of 200 also says its state, when to ask again (pollAfter, ms)
  // and whether it is final (admitted, the challenge, sold out for good):
  // what the status stream needs (stream.js). Each answer of 200 is counted
  // in the line's counts (Room.answer's queue.answered).
  async status(saleID, customer, token, solution) {
    const known = this.origins.sale(saleID);
    if (!known) return null;
    const now = this.origins.dbNow();
    const t = await parseTicket(this.keyring, token, now / 1000);
    if (!t || t.saleID !== saleID || t.customerID !== customer) return admissionInvalid();
    const a = await this.answer(known, t, solution, now);
    if (a && a.status === 200) {
      const from = asksFrom(known.s, t);
      this.origins.lines.answered(saleID, customer, a.state === "sold_out" && !a.final ? "sold_out_for_now" : a.state,
        now - t.arrivedAt * 1000, from === null ? null : now - from);
    }
    return a;
  }

  // answer is Room.status's answer to ticket t (customer's own, of this
  // sale) from what the document says of its sale (known: {s, fresh}).
  async answer({ s, fresh }, t, solution, now) {
    const saleID = t.saleID, customer = t.customerID;
    await ranked(s, t);
    const msg = s.message ? `,"message":${jsonString(s.message, true)}` : "";
    const vars = s.variantsJSON; // last in every answer, as api.Status writes it
    const soldOut = (full, poll) => ({ status: 200, state: "sold_out", final: full, pollAfter: full ? 0 : poll,
      body: `{"state":"sold_out"${full ? "" : `,"pollAfterMs":${poll}`}${msg},"queueIsFull":${full}${vars}}` });
    const waiting = () => {
      const w = wait(s, t, now);
      const paused = s.state === "paused";
      let poll = w.pollAfter;
      if (paused || s.held) poll = Math.max(poll, jitter(SOLD_OUT_POLL_MS));
      if (!fresh) poll = Math.max(poll, 5000);
      const body = `{"state":"waiting","position":${w.position}${range(w.low, w.high)},"estimatedWaitSeconds":${w.seconds},"pollAfterMs":${poll}` +
        `${paused ? ',"paused":true' : ""}${s.held ? ',"held":true' : ""}${fresh ? "" : ',"stale":true'}${msg}${vars}}`;
      return { status: 200, state: "waiting", pollAfter: poll, body };
    };
    if (s.state === "closed") return soldOut(true);
    if (!fresh) return waiting();
    if (s.soldOut && s.pendingHolds) return soldOut(false, jitter(SOLD_OUT_POLL_MS));
    if (s.soldOut) return soldOut(true);
    if (s.state === "paused" || s.held) {
      this.room(saleID).stopped = now;
      return waiting();
    }
    const r = rank(s, t);
    if (r > s.admittedThrough) return waiting();
    const since = Math.max(this.since(saleID, r, s.admittedThrough, now), t.arrivedAt * 1000);
    if (now - since > ADMISSION_TTL_S * 1000) return admissionInvalid();
    if (s.challengeBits > 0 && !(await verifyChallenge(this.keyring, t, solution, s.challengeBits))) {
      const c = { nonce: await challengeNonce(this.keyring.signer, t), bits: s.challengeBits };
      return { status: 200, state: "challenge_required", final: true, body: `{"state":"challenge_required"${msg},"challenge":${challengeJSON(c)}${vars}}` };
    }
    const a = { id: await admissionID(t), saleID, customerID: customer, expiresAt: Math.floor(now / 1000) + ADMISSION_TTL_S };
    const adm = await signAdmission(this.keyring, a);
    return { status: 200, state: "admitted", final: true, body: `{"state":"admitted"${msg},"admissionToken":${jsonString(adm, true)},"expiresIn":${ADMISSION_TTL_S}${vars}}` };
  }

  room(saleID) {
    let h = this.marks.get(saleID);
    if (!h) this.marks.set(saleID, (h = { marks: [], stopped: 0 }));
    return h;
  }

  // since is admittedMarks.since: when this isolate saw the watermark pass
  // rank (from when it first heard of it), or the sale last stopped.
  since(saleID, rank, watermark, now) {
    const h = this.room(saleID);
    const n = h.marks.length;
    if (n === 0 || watermark > h.marks[n - 1].watermark) h.marks.push({ at: now, watermark });
    const cutoff = now - ADMISSION_TTL_S * 1000;
    let drop = 0;
    while (drop + 1 < h.marks.length && h.marks[drop + 1].at <= cutoff) drop++;
    h.marks = h.marks.slice(drop);
    let at = now;
    for (const m of h.marks) {
      if (m.watermark >= rank) {
        at = m.at;
        break;
      }
    }
    return Math.max(at, h.stopped);
  }
}

export function errorBody(code, message) {
  return `{"error":{"code":${jsonString(code, true)},"message":${jsonString(message, true)}}}`;
}

// The refusals the Worker writes itself, as handlers/errors.go's table has them.
function unavailable() {
  return { status: 503, retryAfter: String(2 + Math.floor(Math.random() * 3)),
    body: errorBody("sale_paused_fail_closed", "stock cannot be counted right now; the sale is paused for this request") };
}
function admissionInvalid() {
  return { status: 403, body: errorBody("admission_invalid", "the admission token is not valid for this request") };
}
