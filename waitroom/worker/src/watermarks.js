// The Worker's link to its origins, per isolate, as package edge's Client
// is the Go edge's: it posts its report (the pre-open tickets it signed, in
// total per sale; a batch of their holders in randomized_at_open rooms until
// an origin says it wrote them; its counts of the lines: reports.js) to
// every origin (POST /edge/sync) and takes the signed
// watermarks document one of them answers, verified with the waiting-room
// keys before use. A Worker has no timer of its own: a request finds the
// document due (1 s, 100 ms around an opening and while a sale is open) and
// pulls it, once per isolate at a time, in the background (waitUntil); a
// request that finds no document at all waits for the pull.

import { fromB64, jsonString, sign, verify, utf8 } from "./tokens.js";
import { Holders, Lines, MAX_REPORTED_HOLDERS, holdersJSON } from "./reports.js";

const MAX_DOC_LEN = 4 << 20;
const ORIGIN_TIMEOUT_MS = 2000;
const INTERVAL_MS = 1000;
const NEAR_OPEN_MS = 100;
const REPORT_TTL_MS = 10000;
// STALE_AFTER_MS is how long a sale's facts are trusted past the document's
// lifetime: the Go edge's sale cache trusts an entry a second more.
const STALE_AFTER_MS = 1000;
// PULL_STUCK_MS: a pull started in a request that has ended since (a
// status stream closed mid-pull) never settles; after this long the next
// request starts another.
const PULL_STUCK_MS = 3 * ORIGIN_TIMEOUT_MS;
// FLUSH_MS bounds how long one request's flush goes on reporting.
const FLUSH_MS = 20000;
const FLUSH_STUCK_MS = FLUSH_MS + PULL_STUCK_MS;

// waitersSee is what every waiter of a sale is told at once (salecache's seen):
// its state, sold out and for good, the queue held, the operator's message,
// the opening, each variant's availability; and here also what changes every waiter's place or question
// (the crowd frozen, its final seed, the challenge). The watermark, which
// moves every pull while the sale is open, is not: a waiter hears of it at
// the pace its answers set.
const waitersSee = (s) => JSON.stringify([s.state, !!s.soldOut, !!s.pendingHolds, !!s.held, s.message || "", s.opensAt || "",
  s.preopenCount, !!s.finalSeed, s.challengeBits, s.variantsJSON]);

export class Origins {
  constructor(keyring, origins, edgeID, now = () => Date.now()) {
    this.keyring = keyring;
    this.origins = origins;
    this.edgeID = edgeID;
    this.now = now;
    this.doc = null; // {iat, exp, dbNow, sales: Map id → sale with .seed}
    this.received = 0; // this isolate's clock, ms
    this.good = 0; // the origin that answered last
    this.down = origins.map(() => false); // by origin: marked down (worker.js's passOn)
    this.totals = new Map(); // sale id → pre-open tickets signed here
    this.seen = new Map(); // sale id → Set of draws counted
    this.holders = new Holders(); // pre-open holders no origin has written
    this.lines = new Lines(now); // the counts of the lines served here
    // run names this isolate's counts of the lines (new at each start, as
    // the Go edge's run): origins write them as the row edge/<id>/<run>.
    this.run = [...crypto.getRandomValues(new Uint8Array(4))].map((b) => b.toString(16).padStart(2, "0")).join("");
    this.pulling = null;
    this.pullStarted = 0;
    this.lastPull = -Infinity;
    this.flushing = null;
    this.counted = false; // a ticket counted since flush last reported
    this.flushStarted = 0;
    this.versions = new Map(); // sale id → how often what its waiters are told changed
    this.onChange = null; // called with a sale id when its version moves
  }

  // version is a number that moves when what every waiter of saleID is
  // told changes in this isolate's document (see waitersSee), or a document
  // comes after a stale one: a status stream (stream.js) waits for it to
  // move, as the Go edge's streams wait on salecache's Watch.
  version(saleID) {
    return this.versions.get(saleID) || 0;
  }

  // dbNow is the database's clock as the last document said it (ms).
  dbNow() {
    return this.doc ? this.doc.dbNow + (this.now() - this.received) : this.now();
  }

  // fresh: the document is within its lifetime by this isolate's clock.
  fresh() {
    return this.doc !== null && this.now() - this.received < this.doc.exp - this.doc.iat;
  }

  // sale is what the document says of saleID, with fresh as the Go edge's
  // sale cache judges it (the document's lifetime and a second); null: not
  // a waiting room the document names.
  sale(saleID) {
    const s = this.doc && this.doc.sales.get(saleID);
    if (!s) return null;
    return { s, fresh: this.now() - this.received < this.doc.exp - this.doc.iat + STALE_AFTER_MS };
  }

  // interval is how long after a pull the next is due: every second, every
  // 100 ms from 2 s before a room's opening to 1 s after it and while a sale
  // is open (edge.Client's fastPull), and while more holders wait than a
  // report carries (edge.Client's Run).
  interval() {
    if (!this.doc || this.holders.n > MAX_REPORTED_HOLDERS) return NEAR_OPEN_MS;
    const now = this.dbNow();
    for (const s of this.doc.sales.values()) {
      if (s.state === "open") return NEAR_OPEN_MS;
      if (s.opensAtMs !== null && s.opensAtMs > now - 1000 && s.opensAtMs < now + 2000) return NEAR_OPEN_MS;
    }
    return INTERVAL_MS;
  }

  // refresh pulls when due; the returned promise settles when the pull
  // does (null when none was due).
  refresh() {
    if (this.pulling && this.now() - this.pullStarted < PULL_STUCK_MS) return this.pulling;
    if (this.now() - this.lastPull < this.interval()) return null;
    this.lastPull = this.pullStarted = this.now();
    this.pulling = this.sync().catch(() => {}).finally(() => { this.pulling = null; });
    return this.pulling;
  }

  // count counts one pre-open ticket of saleID (a randomized_at_open room
  // whose crowd is not frozen) for customer, whose draw is d, once per
  // customer in this isolate: in the totals, as a holder of the crowd and
  // an arrival in the line; and makes sure a report carries it within
  // 100 ms (the freeze at the open takes what the origins heard by then).
  count(saleID, d, customer, ctx) {
    let seen = this.seen.get(saleID);
    if (!seen) this.seen.set(saleID, (seen = new Set()));
    if (seen.has(d)) return;
    if (seen.size < 1 << 20) seen.add(d);
    this.totals.set(saleID, (this.totals.get(saleID) || 0) + 1);
    this.holders.add(saleID, customer);
    this.lines.arrived(saleID);
    this.counted = true;
    // A flush that has not settled by FLUSH_STUCK_MS was cut short with its
    // request: another starts.
    if ((!this.flushing || this.now() - this.flushStarted > FLUSH_STUCK_MS) && ctx) {
      this.flushStarted = this.now();
      const f = this.flush().finally(() => { if (this.flushing === f) this.flushing = null; });
      this.flushing = f;
      ctx.waitUntil(f);
    }
  }

  // flush reports what count counted, 100 ms after it, and again while
  // tickets are counted meanwhile (100 ms on) or holders wait for an origin
  // to write them (100 ms on while more wait than one report carries, else
  // a second, as after a pull no origin answered): a Worker has no timer,
  // and an isolate whose requests stop would otherwise keep them until its
  // next request. For FLUSH_MS at most (Cloudflare keeps a request's
  // waitUntil for 30 s after its answer); the next ticket starts another.
  async flush() {
    const start = this.now();
    let wait = NEAR_OPEN_MS;
    while (this.now() - start < FLUSH_MS) {
      this.counted = false;
      await new Promise((r) => setTimeout(r, wait));
      let failed = false;
      try {
        await this.sync();
      } catch {
        failed = true;
      }
      if (!this.counted && this.holders.n === 0) return;
      wait = !failed && (this.counted || this.holders.n > MAX_REPORTED_HOLDERS) ? NEAR_OPEN_MS : INTERVAL_MS;
    }
  }

  // report is this isolate's signed report now, as edge.Client's: its
  // pre-open tickets in total for the rooms whose crowd is not frozen (the
  // others, and their holders not written, are forgotten: no origin takes
  // them any more), a batch of its holders (batch, for the answers that
  // say they were written), its counts of the lines of the rooms the
  // document holds. The body as roomtoken.EdgeReport marshals.
  async report() {
    const preopen = new Map();
    const rooms = this.doc ? this.doc.sales : new Map();
    for (const [id, s] of rooms) {
      if (s.preopenCount >= 0) this.holders.drop(id);
    }
    for (const [id, n] of this.totals) {
      const s = rooms.get(id);
      if (s && s.preopenCount >= 0) {
        this.totals.delete(id); // frozen: no origin counts it any more
        continue;
      }
      preopen.set(id, n);
    }
    const batch = this.holders.batch();
    const queue = this.lines.queueJSON(rooms);
    const now = Math.floor(this.dbNow());
    const totals = [...preopen.keys()].sort().map((id) => `${jsonString(id, true)}:${preopen.get(id)}`).join(",");
    const body = `{"edge":${jsonString(this.edgeID)},"preopen":{${totals}},"run":${jsonString(this.run)}` +
      `${queue ? `,"queue":${queue}` : ""}${batch ? `,"holders":${holdersJSON(batch)}` : ""}}`;
    const token = await sign(this.keyring.signer, `{"aud":"flashline-edge-report","iat":${now},"exp":${now + REPORT_TTL_MS},"body":${body}}`);
    return { token, batch };
  }

  // sync is edge.Client's Sync: the first pull reads the public document
  // first (the report is then signed by the database's clock); the report
  // goes to every origin at once; the document of the one that answered
  // last is taken, or of the first other to answer.
  async sync() {
    if (!this.doc) {
      for (let n = 0; n < this.origins.length; n++) {
        try {
          const out = await this.call(this.origins[n] + "/edge/watermarks", { method: "GET" });
          await this.take(out.document, n);
          break;
        } catch {}
      }
    }
    const { token, batch } = await this.report();
    const body = JSON.stringify({ report: token });
    const preferred = this.good;
    const calls = this.origins.map((o, n) =>
      this.call(o + "/edge/sync", { method: "POST", headers: { "Content-Type": "application/json" }, body }).then((out) => {
        this.down[n] = false; // answering: up again for the requests passed on
        // Written by this origin (or never to be): forgotten here.
        if (batch && out.holdersWritten === true) this.holders.written(batch);
        return { n, doc: out.document };
      }));
    const first = await Promise.allSettled([calls[preferred]]);
    if (first[0].status === "fulfilled") {
      try {
        return await this.take(first[0].value.doc, preferred);
      } catch {}
    }
    const errs = [];
    for (const r of await Promise.allSettled(calls)) {
      if (r.status !== "fulfilled" || r.value.n === preferred) continue;
      try {
        return await this.take(r.value.doc, r.value.n);
      } catch (e) {
        errs.push(e);
      }
    }
    throw new Error("no origin answers");
  }

  async call(url, init) {
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), ORIGIN_TIMEOUT_MS);
    try {
      const resp = await fetch(url, { ...init, signal: ac.signal });
      const text = await resp.text();
      if (resp.status !== 200 || text.length > MAX_DOC_LEN + 1024) throw new Error(`${url}: ${resp.status}`);
      return JSON.parse(text);
    } finally {
      clearTimeout(timer);
    }
  }

  // take verifies a document and makes it this isolate's knowledge, unless
  // it is older than the one held (edge.Client's take).
  async take(token, origin) {
    const doc = await openWatermarks(this.keyring, token);
    if (!(doc.exp > doc.iat) || doc.exp - doc.iat > 60000) throw new Error("watermarks: lifetime out of bounds");
    if (this.doc && doc.iat < this.doc.iat && this.fresh()) return;
    const before = this.doc, wasFresh = this.fresh();
    this.doc = doc;
    this.received = this.now();
    this.good = origin;
    for (const id of new Set([...doc.sales.keys(), ...(before ? before.sales.keys() : [])])) {
      const was = before && before.sales.get(id), is = doc.sales.get(id);
      if (wasFresh && was && is && waitersSee(was) === waitersSee(is)) continue;
      this.versions.set(id, this.version(id) + 1);
      if (this.onChange) this.onChange(id);
    }
  }
}

// customerOrigin is the origin (of n) a customer's requests go to first,
// as waitroom/edge's CustomerOrigin: FNV-1a (32 bits) of the request's
// Authorization header's signed part (originKey), mixed by MurmurHash3's
// finalizer, scaled to n by its high bits. A customer sticks to one origin
// through any isolate and any Go edge.
export function customerOrigin(authorization, n) {
  const key = originKey(authorization);
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return Math.floor(((h >>> 0) * n) / 4294967296);
}

// originKey is waitroom/edge's originKey: the token's payload, between its
// first and last dots (its signature covers it as it is, where the scheme's
// case, spaces and the signature's spare bits may be respelled), or the
// whole header without two dots.
function originKey(authorization) {
  const i = authorization.indexOf("."), j = authorization.lastIndexOf(".");
  return i < 0 || i === j ? authorization : authorization.slice(i + 1, j);
}

// openWatermarks is roomtoken's OpenWatermarks: the JWS verified with the
// keyring, the audience checked, the body unsealed (AES-256-GCM under
// HMAC-SHA256(key, "flashline draw seed seal v1"), additional data
// "flashline watermarks"; a body in the clear read as it is), every sale's
// draw seed unsealed with the sale id as additional data.
export async function openWatermarks(keyring, token) {
  const v = await verify(keyring, token, MAX_DOC_LEN);
  if (!v) throw new Error("watermarks: bad signature or unknown key");
  const env = JSON.parse(v.payload);
  const keys = Object.keys(env);
  if (env.aud !== "flashline-watermarks" || keys.some((k) => !["aud", "iat", "exp", "body"].includes(k))) {
    throw new Error("watermarks: not a watermarks document");
  }
  if (!Number.isSafeInteger(env.iat) || !Number.isSafeInteger(env.exp)) throw new Error("watermarks: bad times");
  let body = env.body;
  if (body && body.sealed != null) {
    body = JSON.parse(new TextDecoder().decode(await unseal(v.key, "flashline watermarks", fromB64(body.sealed))));
  }
  const sales = new Map();
  for (const s of body.sales || []) {
    s.seed = await unseal(v.key, s.id, fromB64(s.sealedSeed || ""));
    s.finalSeedBytes = s.finalSeed ? fromB64(s.finalSeed) : null; // the committed crowd's (base64, as Go's []byte)
    s.opensAtMs = s.opensAt ? Date.parse(s.opensAt) : null;
    s.message = s.message || "";
    s.variantsJSON = variantsJSON(s);
    sales.set(s.id, s);
  }
  return { iat: env.iat, exp: env.exp, dbNow: body.dbNow, sales };
}

// The bounds roomtoken's checkVariants holds a document's variants to.
const MAX_VARIANTS = 100;
const MAX_TITLE_LENGTH = 120; // characters, as a sale's title
const VARIANT_SKU = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const AVAILABILITIES = ["available", "few_left", "sold_out"];

// variantsJSON is the "variants" member of every status answer of sale s,
// as api.Status writes it (each variant's sku, title and availability;
// "" for a sale without variants), checked against the document's bounds
// and written once per document rather than per answer.
function variantsJSON(s) {
  const vs = s.variants || [];
  if (!Array.isArray(vs) || vs.length > MAX_VARIANTS) throw new Error(`watermarks: sale ${s.id}: more than ${MAX_VARIANTS} variants`);
  if (vs.length === 0) return "";
  const out = vs.map((v) => {
    if (typeof v.sku !== "string" || !VARIANT_SKU.test(v.sku) || typeof v.title !== "string" ||
      [...v.title].length > MAX_TITLE_LENGTH || !AVAILABILITIES.includes(v.availability)) {
      throw new Error(`watermarks: sale ${s.id}: a variant out of bounds`);
    }
    return `{"sku":${jsonString(v.sku, true)},"title":${jsonString(v.title, true)},"availability":${jsonString(v.availability, true)}}`;
  });
  return `,"variants":[${out.join(",")}]`;
}

async function unseal(key, ad, sealed) {
  if (sealed.length < 12) throw new Error("watermarks: sealed value too short");
  return new Uint8Array(await crypto.subtle.decrypt({ name: "AES-GCM", iv: sealed.slice(0, 12), additionalData: utf8(ad) }, key.seal, sealed.slice(12)));
}
