// What an isolate's report carries besides its pre-open totals, as the Go
// edge's (waitroom/edge): its pre-open holders of randomized_at_open rooms,
// in batches, until an origin says it wrote them (edge's holders.go), and
// its counts of each line it serves (waitroom's analytics.go, the Go edge's
// queue counts: arrivals, waits to admission, waiters gone quiet, returns), cumulative
// since the isolate started, under a run id of its own.

import { jsonString } from "./tokens.js";

// MAX_REPORTED_HOLDERS is roomtoken.MaxReportedHolders: at most so many
// holders in one report, all sales together (an origin refuses more).
export const MAX_REPORTED_HOLDERS = 1024;
// MAX_HOLDERS: the holders an isolate keeps waiting for an origin, all
// sales together; beyond them new ones are left out of the committed crowd
// (and logged). An eighth of the Go edge's maxHolders: an isolate has about
// 128 MB for everything, and a holder with its sale and customer ids (up to
// 128 bytes each) takes a few hundred bytes. Its reports carry 1,024 every
// 100 ms while they wait, so 32,768 is three seconds of an isolate's own
// arrivals at 10,000 a second.
export const MAX_HOLDERS = 1 << 15;
// MAX_REPORTED_LINES is the Go edge's maxReportedLines: the lines whose
// counts one report carries (the first by sale id).
export const MAX_REPORTED_LINES = 32;

// Holders are the customers given a pre-open ticket in a randomized_at_open
// room here that no origin has said it wrote (AddHolders), by sale.
export class Holders {
  constructor() {
    this.bySale = new Map(); // sale id → Set of customer ids
    this.n = 0;
    this.refused = 0; // left out: more than MAX_HOLDERS waited
  }

  // add keeps customer as a holder of saleID until an origin writes it;
  // false: MAX_HOLDERS wait already, and it is left out.
  add(saleID, customer) {
    let set = this.bySale.get(saleID);
    if (set && set.has(customer)) return true;
    if (this.n >= MAX_HOLDERS) {
      if (this.refused++ % 1024 === 0) {
        console.warn(`waitroom: worker: pre-open holders left out of the committed crowd: ${this.n} wait for an origin`, saleID);
      }
      return false;
    }
    if (!set) this.bySale.set(saleID, (set = new Set()));
    set.add(customer);
    this.n++;
    return true;
  }

  // batch is the holders the next report carries: at most
  // MAX_REPORTED_HOLDERS of those not written yet, the sales by id; null
  // when none wait.
  batch() {
    let out = null;
    let room = MAX_REPORTED_HOLDERS;
    for (const id of [...this.bySale.keys()].sort()) {
      if (room === 0) break;
      for (const c of this.bySale.get(id)) {
        if (room === 0) break;
        if (!out) out = new Map();
        if (!out.has(id)) out.set(id, []);
        out.get(id).push(c);
        room--;
      }
    }
    return out;
  }

  // written forgets the holders of batch, written by an origin (those
  // added since stay until an answer says so).
  written(batch) {
    for (const [id, cs] of batch) {
      const set = this.bySale.get(id);
      if (!set) continue;
      for (const c of cs) if (set.delete(c)) this.n--;
      if (set.size === 0) this.bySale.delete(id);
    }
  }

  // drop forgets saleID's holders not written: its crowd is frozen, and no
  // origin takes them any more.
  drop(saleID) {
    const set = this.bySale.get(saleID);
    if (!set) return;
    if (set.size > 0) console.warn(`waitroom: worker: ${set.size} pre-open holders left out of the committed crowd`, saleID);
    this.n -= set.size;
    this.bySale.delete(saleID);
  }
}

// holdersJSON is a batch as the report's "holders" member (roomtoken.EdgeReport's,
// sales by id). The customer ids are not HTML-escaped as Go's json.Marshal
// would (the origin reads either): a batch of 1,024 ids of 128 '<' stays
// well within the 1 MiB an origin reads, signed and in base64.
export function holdersJSON(batch) {
  const parts = [...batch.keys()].sort().map((id) => `${jsonString(id, true)}:[${batch.get(id).map((c) => jsonString(c)).join(",")}]`);
  return `{${parts.join(",")}}`;
}

// The bounds of flashline's QueueCounts and waitroom's analytics.
const QUEUE_BUCKETS = [1, 2, 5, 10, 20, 30, 60, 90, 120, 180, 300, 600, 900, 1800, 3600, 7200];
const QUEUE_MINUTES = 120;
const LEFT_AFTER_MS = 60000; // waitroom.LeftAfter
const RETURN_AFTER_MS = 30000; // waitroom.ReturnAfter
// MAX_WAITERS: the waiters an isolate follows for the line's counts; a
// sixteenth of waitroom's maxWaiters, for an isolate's memory as MAX_HOLDERS.
// Waiters past it are answered as always, and not followed.
const MAX_WAITERS = 1 << 16;
const SWEEP_EVERY_MS = 1000; // as RunQueuePublisher sweeps

// queueBucket is flashline.QueueBucket: the bucket of QUEUE_BUCKETS that
// ms falls in.
function queueBucket(ms) {
  const s = ms / 1000;
  for (let i = 0; i < QUEUE_BUCKETS.length; i++) if (s <= QUEUE_BUCKETS[i]) return i;
  return QUEUE_BUCKETS.length;
}

const newCounts = () => ({ arrivals: 0, wait: new Array(QUEUE_BUCKETS.length + 1).fill(0),
  toReserve: new Array(QUEUE_BUCKETS.length + 1).fill(0), left: 0, returns: 0, active: 0, minutes: new Map() });

// Lines are this isolate's counts of each sale's line (flashline.QueueCounts),
// kept as waitroom's queueStats keeps an instance's: a waiter is one
// customer in one sale, followed from its answers (at most MAX_WAITERS).
// The reservations are counted by the origins, which make them.
export class Lines {
  constructor(now = () => Date.now()) {
    this.now = now;
    this.sales = new Map(); // sale id → counts
    this.waiters = new Map(); // sale id NUL customer → {seen, admitted, soldOut, ended}
    this.swept = -Infinity;
  }

  sale(saleID) {
    let c = this.sales.get(saleID);
    if (!c) this.sales.set(saleID, (c = newCounts()));
    return c;
  }

  // arrived counts a new place in saleID's line.
  arrived(saleID) {
    const c = this.sale(saleID);
    c.arrivals++;
    const minute = Math.floor(this.now() / 60000);
    c.minutes.set(minute, (c.minutes.get(minute) || 0) + 1);
    for (const m of c.minutes.keys()) if (m <= minute - QUEUE_MINUTES) c.minutes.delete(m);
  }

  // answered notes the status answer state given to customer's ticket,
  // which waited waitedMs since it arrived and whose page began asking
  // askingMs before (waitroom's asksFrom; null: not known): a waiter seen,
  // admitted (its wait counted, once), sold out for now ("sold_out_for_now":
  // still followed, not active) or told the sale sold out for good (its
  // time in line ended: followed until the sweep forgets it, never left);
  // and, the first time this isolate hears a waiter it follows, a return
  // when askingMs is over RETURN_AFTER_MS (waitroom's queueStats.answered).
  answered(saleID, customer, state, waitedMs, askingMs) {
    const key = saleID + "\u0000" + customer;
    const c = this.sale(saleID);
    const now = this.now();
    let w = this.waiters.get(key);
    const known = !!w;
    if (known && w.ended) {
      w.seen = now;
      return;
    }
    const followed = known || this.waiters.size < MAX_WAITERS;
    if (!known && followed && askingMs !== null && askingMs > RETURN_AFTER_MS) c.returns++;
    if (state === "sold_out") {
      if (followed) this.waiters.set(key, { seen: now, admitted: false, soldOut: false, ended: true });
      return;
    }
    if (state === "admitted") {
      if (known && w.admitted) {
        w.seen = now;
        return;
      }
      c.wait[queueBucket(waitedMs)]++;
      if (!w) w = { seen: now, admitted: true, soldOut: false, ended: false };
      w.admitted = true;
    }
    if (!followed) return;
    if (!w) w = { seen: now, admitted: false, soldOut: false, ended: false };
    w.seen = now;
    w.soldOut = state === "sold_out_for_now";
    this.waiters.set(key, w);
  }

  // sweep counts the waiters not heard from for LEFT_AFTER_MS as left (an
  // admitted one is only forgotten) and sets each sale's waiters seen
  // lately; once a second at most.
  sweep() {
    const now = this.now();
    if (now - this.swept < SWEEP_EVERY_MS) return;
    this.swept = now;
    const active = new Map();
    for (const [key, w] of this.waiters) {
      const saleID = key.slice(0, key.indexOf("\u0000"));
      if (now - w.seen <= LEFT_AFTER_MS) {
        if (!w.admitted && !w.soldOut && !w.ended) active.set(saleID, (active.get(saleID) || 0) + 1);
      } else {
        if (!w.admitted && !w.ended) this.sale(saleID).left++;
        this.waiters.delete(key);
      }
    }
    for (const [id, c] of this.sales) c.active = active.get(id) || 0;
  }

  // queueJSON is the report's "queue" member (roomtoken.EdgeReport's): the
  // counts of the lines of the rooms the document holds (rooms: a Map by
  // sale id; the others are forgotten), at most MAX_REPORTED_LINES, the
  // first by id; "" for none.
  queueJSON(rooms) {
    this.sweep();
    for (const id of this.sales.keys()) {
      if (!rooms.has(id)) {
        this.sales.delete(id);
        for (const key of this.waiters.keys()) if (key.startsWith(id + "\u0000")) this.waiters.delete(key);
      }
    }
    const ids = [...this.sales.keys()].sort().slice(0, MAX_REPORTED_LINES);
    if (ids.length === 0) return "";
    return `{${ids.map((id) => `${jsonString(id, true)}:${countsJSON(this.sales.get(id))}`).join(",")}}`;
  }
}

// countsJSON is c as flashline.QueueCounts marshals (returns omitted when
// none, and the minutes, by their keys' text, omitted when none).
function countsJSON(c) {
  let minutes = "";
  if (c.minutes.size > 0) {
    const keys = [...c.minutes.keys()].map(String).sort();
    minutes = `,"minutes":{${keys.map((k) => `"${k}":${c.minutes.get(Number(k))}`).join(",")}}`;
  }
  return `{"arrivals":${c.arrivals},"wait":[${c.wait.join(",")}],"toReserve":[${c.toReserve.join(",")}],"left":${c.left}${c.returns > 0 ? `,"returns":${c.returns}` : ""},"active":${c.active}${minutes}}`;
}
