// The status stream, GET /sales/{id}/status/stream?token=..., as
// handlers/stream.go writes it on the Go edge: server-sent events, each an
// "event: status" whose data is the answer GET .../status would give now
// (room.js), sent when it changes in more than its pollAfterMs; at once when
// what every waiter is told changes in this isolate's document (Origins'
// watch), otherwise at the pace the answers set, as a poll would; a ": still
// here" comment every 10 s; the end after an answer the client must act on
// (admitted, the challenge) or "sold out" for good; at its lifetime (5 min)
// "event: reconnect" with "retry: 0". One customer keeps at most two streams
// of a sale open per isolate: a third ends the oldest with "retry: 5000".
// A document gone stale is answered as the polls answer it (waiting, stale,
// nobody admitted): each answer is the poll's, made from the isolate's copy
// of the document, never by asking an origin per stream.
//
// A Worker has no timer of its own, and a crowd that waits on streams makes
// no other request that would pull the document when due: one stream per
// isolate pulls it (the pump, in that stream's request); when it ends,
// another open stream takes over.

export const LIFETIME_MS = 5 * 60 * 1000;
export const HEARTBEAT_MS = 10000;
// MIN_POLL_MS bounds how often one stream makes its answer again when
// nothing every waiter hears has changed.
export const MIN_POLL_MS = 250;
// TICK_MS: how often a waiting stream looks at what other requests flagged
// (the document changing): the most a change waits for its streams to see
// it, beyond the document's own 100 ms pulls around an opening.
const TICK_MS = 200;
// PUMP_TICK_MS: how often the stream that pulls the document looks whether
// its pull has ended (one stream per isolate).
const PUMP_TICK_MS = 25;
// PER_CUSTOMER streams of one customer for one sale stay open per isolate
// (two tabs); a newer one ends the oldest, telling it to wait REPLACED_RETRY_MS.
export const PER_CUSTOMER = 2;
export const REPLACED_RETRY_MS = 5000;
// MAX_STREAMS open per isolate (the Go edge's --max-streams default): past
// it a stream is refused (503 overloaded) and the page polls.
export const MAX_STREAMS = 5000;
// A pull the pump waits on that has not settled by then was started in a
// request that ended (Origins' PULL_STUCK_MS): the pump asks again.
const PULL_WAIT_MS = 6000;

const enc = new TextEncoder();
const POLL_AFTER = /,"pollAfterMs":\d+/;
const HEARTBEAT = enc.encode(": still here\n\n");
const reconnect = (ms) => enc.encode(`event: reconnect\nretry: ${ms}\n\n`);

// sleep is a promise settled after ms by a timer of the request that
// awaits it.
const sleep = (ms) => new Promise((r) => setTimeout(r, Math.max(ms, 0)));

// Streams are one isolate's open status streams. Each waits on timers of
// its own request and looks, every TICK_MS, at the flags other requests set
// (a newer stream of its customer's, the document changing, its turn to
// pull): nothing is settled across requests, and nothing piles up on a
// promise shared by thousands.
export class Streams {
  constructor(link, now = () => Date.now()) {
    this.link = link; // Origins
    this.now = now;
    this.open = new Set();
    this.bySale = new Map(); // sale id → its open streams
    this.byCustomer = new Map(); // sale id NUL customer → streams, oldest first
    this.pumper = null; // the stream whose request pulls the document
    this.pumpBeat = 0; // when its pump last went round
    link.onChange = (saleID) => {
      for (const me of this.bySale.get(saleID) || []) me.woken = true;
    };
  }

  // serve answers a status stream of saleID for customer: status() makes
  // the poll's answer (Room.status). null: not decided here (passed on, as
  // the poll is); {overloaded: true}: too many streams open here; an
  // answer not 200 is the poll's, written as it; otherwise {stream}, the
  // events' body.
  async serve(saleID, customer, status, ctx) {
    if (this.open.size >= MAX_STREAMS) return { overloaded: true };
    // The version is read before each answer is made: a change between the
    // two ends the wait that follows at once.
    let version = this.link.version(saleID);
    const first = await status();
    if (first === null || first.status !== 200) return first;
    const { readable, writable } = new TransformStream();
    const writer = writable.getWriter();
    const me = this.hold(saleID, customer);
    const send = async (bytes) => {
      try {
        await writer.write(bytes);
        return true;
      } catch {
        return false;
      }
    };
    // wait is the next reason to wake: "time" (after ms), "watch",
    // "replaced" or "poked" (this stream's turn to pull the document). It
    // looks at the flags another request sets (me.woken, me.replaced,
    // me.poked) on a timer of its own, every TICK_MS: a promise settled
    // from another request's context (a pull's, a newer stream's) is not
    // run in this one, and workerd cancels a request left waiting on
    // nothing of its own as hung (3,420 streams of 5,000 shoppers so).
    const wait = async (ms) => {
      const until = this.now() + Math.max(ms, 0);
      for (;;) {
        if (me.replaced) return "replaced";
        if (me.poked) return "poked";
        if (me.woken) {
          me.woken = false;
          return "watch";
        }
        const left = until - this.now();
        if (left <= 0) return "time";
        await sleep(Math.min(left, TICK_MS));
      }
    };
    const run = async () => {
      let res = first, last = null;
      const endsAt = this.now() + LIFETIME_MS;
      let beat = this.now() + HEARTBEAT_MS;
      for (;;) {
        // Sent when it differs in more than its pollAfterMs (a poll's
        // pace, which a stream does not need).
        const same = res.body.replace(POLL_AFTER, "");
        if (same !== last) {
          if (!(await send(enc.encode(`event: status\ndata: ${res.body}\n\n`)))) return;
          last = same;
        }
        if (res.final) return;
        const again = this.now() + Math.max(res.pollAfter || 0, MIN_POLL_MS);
        while (this.link.version(saleID) === version) {
          this.keepPulling(me);
          const why = await wait(Math.min(again, beat, endsAt) - this.now());
          if (why === "replaced") {
            await send(reconnect(REPLACED_RETRY_MS));
            return;
          }
          if (why === "poked") {
            me.poked = false; // keepPulling makes it this stream's to pull
            continue;
          }
          if (why === "watch") break;
          const now = this.now();
          if (now >= endsAt) {
            await send(reconnect(0));
            return;
          }
          if (now >= beat) {
            if (!(await send(HEARTBEAT))) return;
            beat = now + HEARTBEAT_MS;
          }
          if (now >= again) break;
        }
        version = this.link.version(saleID);
        res = await status();
        // Nothing more to stream (the ticket expired meanwhile, the sale
        // is no longer in the document): the client's next request hears why.
        if (res === null || res.status !== 200) return;
      }
    };
    const done = run()
      .catch(() => {})
      .finally(async () => {
        this.release(me);
        try {
          await writer.close();
        } catch {}
      });
    if (ctx) ctx.waitUntil(done);
    return { stream: readable };
  }

  // hold counts a stream of customer's for saleID, ending the oldest beyond
  // PER_CUSTOMER.
  hold(saleID, customer) {
    const key = saleID + "\u0000" + customer;
    const me = { saleID, key, replaced: false, poked: false, woken: false };
    const held = this.byCustomer.get(key) || [];
    held.push(me);
    while (held.length > PER_CUSTOMER) {
      const old = held.shift();
      old.replaced = true;
    }
    this.byCustomer.set(key, held);
    let sale = this.bySale.get(saleID);
    if (!sale) this.bySale.set(saleID, (sale = new Set()));
    sale.add(me);
    this.open.add(me);
    return me;
  }

  // release forgets a stream that ended; if its request was pulling the
  // document, another open stream takes that over.
  release(me) {
    this.open.delete(me);
    const sale = this.bySale.get(me.saleID);
    if (sale && sale.delete(me) && sale.size === 0) this.bySale.delete(me.saleID);
    const held = this.byCustomer.get(me.key);
    if (held) {
      const i = held.indexOf(me);
      if (i >= 0) held.splice(i, 1);
      if (held.length === 0) this.byCustomer.delete(me.key);
    }
    if (this.pumper === me) {
      this.pumper = null;
      const next = this.open.values().next();
      // Woken in its own request (its wait sees the flag): timers and
      // fetches belong to the request that makes them.
      if (!next.done) next.value.poked = true;
    }
  }
  // keepPulling makes me the stream whose request pulls the document when
  // due, if none is, or if the one that was has not pulled for longer than
  // a pull can take (its request ended without a word: the pump then
  // never wakes again).
  keepPulling(me) {
    if (this.pumper !== null && this.now() - this.pumpBeat < PULL_WAIT_MS + 2000) return;
    this.pumper = me;
    this.pumpBeat = this.now();
    this.pump(me).catch(() => {});
  }

  async pump(me) {
    const link = this.link;
    while (this.pumper === me) {
      this.pumpBeat = this.now();
      const due = link.lastPull + link.interval() - link.now();
      if (due > 0) {
        await sleep(due);
        continue;
      }
      const pull = link.refresh();
      if (!pull) {
        await sleep(100); // not due after all: never a loop without a wait
        continue;
      }
      // Waited for on timers of its own: the pull may be another
      // request's, whose promise settles in that request's context.
      const until = this.now() + PULL_WAIT_MS;
      while (link.pulling === pull && this.now() < until) await sleep(PUMP_TICK_MS);
    }
  }
}
