// Flashline's waiting room as a Cloudflare Worker: what `flashline serve
// --role edge` does for waiting rooms, on the web platform's APIs alone
// (fetch, WebCrypto, the Cache API). See docs/edge.md.
//
//   - GET /sales/{id}/ticket, /status and /status/stream of a waiting room
//     the origins' signed watermarks document names, for a customer whose
//     HS256 token the Worker decides: answered here (room.js, stream.js), in
//     the formats origins and the Go edge use;
//   - the waiting page and its assets: the origin's, kept in the Cache API
//     for as long as the origin's Cache-Control allows;
//   - /admin, /metrics and /edge/*: 404, as on the Go edge;
//   - everything else, and whatever the Worker does not decide: passed on
//     to an origin unchanged (no origin answering: 503 overloaded).
//
// Configuration (wrangler.toml's vars and secrets): ORIGINS (comma-separated
// base URLs), FLASHLINE_WAITROOM_KEYS and FLASHLINE_JWT_SECRET (secrets),
// EDGE_ID (optional; default "worker-" and random hex, one per isolate).

import { customerOf, jwtKeyOf, parseKeyring } from "./tokens.js";
import { Origins, customerOrigin } from "./watermarks.js";
import { Room, errorBody } from "./room.js";
import { Streams } from "./stream.js";

const SALE_ID = "sale_[0-7][0-9A-HJKMNP-TV-Z]{25}";
const ROOM_PATH = new RegExp(`^/sales/(${SALE_ID})/(ticket|status|status/stream)$`);
const PAGE_PATH = new RegExp(`^/sales/${SALE_ID}/wait$`);
const CORS_EXPOSE = "Retry-After, Idempotent-Replayed";

let state = null; // this isolate's: built from env on the first request

async function init(env) {
  const keyring = await parseKeyring(env.FLASHLINE_WAITROOM_KEYS, env.FLASHLINE_JWT_SECRET);
  const origins = String(env.ORIGINS || "").split(",").map((o) => o.trim().replace(/\/+$/, "")).filter(Boolean);
  if (origins.length === 0) throw new Error("ORIGINS is not set");
  const id = env.EDGE_ID || "worker-" + [...crypto.getRandomValues(new Uint8Array(4))].map((b) => b.toString(16).padStart(2, "0")).join("");
  const link = new Origins(keyring, origins, id);
  return { origins, link, room: new Room(keyring, link), streams: new Streams(link), jwtKey: await jwtKeyOf(env.FLASHLINE_JWT_SECRET), turn: 0 };
}

export default {
  async fetch(request, env, ctx) {
    if (!state) state = init(env).catch((e) => { state = null; throw e; });
    const st = await state;
    const url = new URL(request.url);
    const path = url.pathname;

    if (path === "/healthz") return json(200, '{"status":"ok"}');
    if (path === "/admin" || path.startsWith("/admin/") || path === "/metrics" || path.startsWith("/edge/")) {
      return json(404, errorBody("not_found", "not found"));
    }
    // The document: pulled when due, in the background; awaited only when
    // this isolate has none yet.
    const pull = st.link.refresh();
    if (pull && !st.link.doc) await pull;
    else if (pull) ctx.waitUntil(pull);

    if (path === "/readyz") {
      return st.link.fresh() ? json(200, '{"status":"ready"}') : json(503, '{"status":"not ready","reason":"no origin has answered lately"}');
    }
    const m = request.method === "GET" && ROOM_PATH.exec(path);
    if (m) {
      const answer = await roomAnswer(st, request, url, m[1], m[2], ctx);
      if (answer && answer.stream) {
        return new Response(answer.stream, { status: 200, headers: { "Content-Type": "text/event-stream", "Cache-Control": "no-store",
          "X-Accel-Buffering": "no", "Access-Control-Allow-Origin": "*", "Access-Control-Expose-Headers": CORS_EXPOSE } });
      }
      if (answer && answer.overloaded) {
        // Past MAX_STREAMS in this isolate: handlers/errors.go's overloaded.
        return json(503, errorBody("overloaded", "too busy right now; retry shortly"),
          { "Retry-After": String(1 + Math.floor(Math.random() * 2)), "Access-Control-Allow-Origin": "*", "Access-Control-Expose-Headers": CORS_EXPOSE });
      }
      if (answer) {
        const headers = { "Cache-Control": "no-store", "Access-Control-Allow-Origin": "*", "Access-Control-Expose-Headers": CORS_EXPOSE };
        if (answer.retryAfter) headers["Retry-After"] = answer.retryAfter;
        return json(answer.status, answer.body, headers);
      }
    }
    if ((request.method === "GET" || request.method === "HEAD") && isPageOrAsset(path)) return cached(st, request, url, ctx);
    return passOn(st, request, url);
  },
};

// roomAnswer is the Worker's answer to a ticket or a status poll, or null
// (passed on): a query read as the Go edge's door reads it (nothing
// escaped, token and solution at most once each), a customer decided here.
async function roomAnswer(st, request, url, saleID, route, ctx) {
  const q = url.search.slice(1);
  if (q.includes("%") || q.includes("+") || q.includes(";")) return null;
  const params = {};
  for (const pair of q === "" ? [] : q.split("&")) {
    const i = pair.indexOf("=");
    const key = i < 0 ? pair : pair.slice(0, i);
    if (key !== "token" && key !== "solution") continue;
    if (key in params) return null;
    params[key] = i < 0 ? "" : pair.slice(i + 1);
  }
  const customer = await customerOf(st.jwtKey, request.headers.get("Authorization"), Date.now() / 1000);
  if (customer === null) return null;
  if (route === "ticket") return st.room.ticket(saleID, customer, params.token || "", ctx);
  if (!("token" in params)) return null;
  const status = () => st.room.status(saleID, customer, params.token, params.solution || "");
  if (route === "status/stream") return st.streams.serve(saleID, customer, status, ctx);
  return status();
}

function isPageOrAsset(path) {
  return PAGE_PATH.test(path) || path.startsWith("/waitpage/") || path === "/embed.js" || path === "/favicon.ico";
}

// cached serves the origin's page and assets through the Cache API: a
// versioned asset is immutable, the page is kept as long as the origin says.
async function cached(st, request, url, ctx) {
  const cache = typeof caches !== "undefined" ? caches.default : null;
  if (cache && request.method === "GET") {
    try {
      const hit = await cache.match(request);
      if (hit) return hit;
    } catch {}
  }
  const resp = await passOn(st, request, url);
  const cc = resp.headers.get("Cache-Control") || "";
  if (cache && request.method === "GET" && resp.status === 200 && /max-age=[1-9]/.test(cc) && !/no-store|private/.test(cc)) {
    try {
      ctx.waitUntil(cache.put(request, resp.clone()).catch(() => {}));
    } catch {}
  }
  return resp;
}

// passOn sends request to an origin unchanged: its customer's first
// (customerOrigin of its Authorization header, as the Go edge's; a request
// without one, the next origin in turn), the origins marked down last (one
// a request could not reach, until a request or a pull reaches it again:
// the link's down); a GET or HEAD that cannot reach it goes to the next,
// and so does a request with an Idempotency-Key (a reservation: the next
// origin answers the same key as the first would, once), its body read
// once, at most MAX_BODY bytes, as the Go edge reads it. The Go edge sends
// any request on that could not connect; workerd's fetch says no more than
// "Network connection lost." whether it connected or not, so a request
// without a key goes to one origin only. No origin answering: 503 overloaded with
// Retry-After: 2, readable from any origin.
const MAX_BODY = 1 << 20; // handlers' maxEdgeBody

// readAtMost reads a body to its end, or stops at more than max bytes
// (null): a chunked body declares no length, and reading it whole first
// would let one request take the isolate's memory.
async function readAtMost(stream, max) {
  const reader = stream.getReader();
  const chunks = [];
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    n += value.byteLength;
    if (n > max) {
      reader.cancel().catch(() => {});
      return null;
    }
    chunks.push(value);
  }
  const out = new Uint8Array(n);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out.buffer;
}
async function passOn(st, request, url) {
  const safe = request.method === "GET" || request.method === "HEAD";
  const keyed = !safe && request.headers.has("Idempotency-Key");
  let body = safe ? undefined : request.body;
  if (keyed && request.body) {
    const declared = Number(request.headers.get("Content-Length") || 0);
    body = declared > MAX_BODY ? null : await readAtMost(request.body, MAX_BODY).catch(() => null);
    if (body === null) {
      return json(400, errorBody("invalid_request", "the request body could not be read, or is too large"));
    }
  }
  const order = originOrder(st, request);
  const tries = safe || keyed ? order.length : 1;
  for (let i = 0; i < tries; i++) {
    const n = order[i];
    const target = st.origins[n] + url.pathname + url.search;
    const headers = new Headers(request.headers);
    const client = request.headers.get("CF-Connecting-IP");
    if (client) {
      const prior = request.headers.get("X-Forwarded-For");
      headers.set("X-Forwarded-For", prior ? `${prior}, ${client}` : client);
    }
    headers.set("X-Forwarded-Host", url.host);
    headers.set("X-Forwarded-Proto", url.protocol.replace(":", ""));
    try {
      const resp = await fetch(target, { method: request.method, headers, body, redirect: "manual" });
      st.link.down[n] = false;
      return resp;
    } catch {
      st.link.down[n] = true;
    }
  }
  return json(503, errorBody("overloaded", "no origin answers right now; retry shortly"),
    { "Retry-After": "2", "Access-Control-Allow-Origin": "*", "Access-Control-Expose-Headers": CORS_EXPOSE });
}

// originOrder is the order request tries the origins in: from its
// customer's on, those marked down after the others.
function originOrder(st, request) {
  const k = st.origins.length;
  const key = request.headers.get("Authorization");
  const first = key ? customerOrigin(key, k) : (st.turn = (st.turn + 1) % k);
  const order = [];
  for (const down of [false, true]) {
    for (let i = 0; i < k; i++) {
      const n = (first + i) % k;
      if (st.link.down[n] === down) order.push(n);
    }
  }
  return order;
}

function json(status, body, headers = {}) {
  return new Response(body, { status, headers: { "Content-Type": "application/json; charset=utf-8", ...headers } });
}
