// The sale the page is for, and everything the page changes as it runs, in
// one object; plus the one pending step of the flow (schedule) and stopping
// everything that runs in the background (stopAll).

import { jwtKey } from "./storage.js";
import { host } from "./host.js";

// The page is either served by the API itself at /sales/{id}/wait, or
// exported as static files (flashline page export) for a CDN or any web
// server: the export names the sale and the API's base URL in meta tags;
// served, both are empty (the sale from the address, the API on this origin).
// On a shop's page (embed.js) the script tag names both (host.js).
function meta(name) {
  const m = document.querySelector('meta[name="' + name + '"]');
  return m ? m.content.trim() : "";
}
const exportedSale = host.embedded ? host.saleId : meta("flashline-sale");
const match = exportedSale || host.embedded ? null : window.location.pathname.match(/^\/sales\/([^/]+)\/wait\/?$/);
const saleId = exportedSale || (match ? decodeURIComponent(match[1]) : "");

// sale is fixed for the page's life.
export const sale = Object.freeze({
  known: saleId !== "",  // false: the address is not a sale's waiting room
  id: saleId,
  api: (host.embedded ? host.api : meta("flashline-api")).replace(/\/+$/, ""), // the API's base URL ("": this origin)
  base: "/sales/" + encodeURIComponent(saleId), // the sale's API path
  jwtKey: jwtKey(saleId) // where the customer's token is kept
});

// state is all the page's mutable state. Sealed: assigning a field not
// listed here is a TypeError (modules are strict), not a new variable.
export const state = Object.seal({
  jwt: null,               // the customer's bearer token
  keys: null,              // storage keys for this sale and customer (keysFor)
  ticket: null,            // the waiting-room ticket token
  challenge: null,         // {nonce, bits} being solved or solved
  solution: null,          // {nonce, value}
  worker: null,            // the proof-of-work Worker while it runs
  awaitingSolution: false, // the next poll waits for the worker's answer
  pollAfterMs: 1000,       // the server's pace for ticket and status requests
  lastPollAt: 0,           // when the last status request was sent (ms)
  timer: 0,                // the one pending step of the flow
  countdownTimer: 0,       // the reservation's countdown (setInterval)
  clockSkewMs: 0,          // server clock minus ours, from the Date header
  attempts: 0,             // consecutive retries of the current step
  ticketResets: 0,         // tickets dropped and renewed since the last good answer
  idemResets: 0,           // Idempotency-Keys replaced after idempotency_key_reused
  policyShown: false,      // the sale's policy is on the page
  opensTimer: 0,           // the countdown to the open (setInterval; outlives stopAll)
  retryTimer: 0,           // the "trying again in n s" countdown while unreachable
  linkToken: null,         // the link's token while the customer chooses an account
  stream: null,            // the status stream's AbortController while one is open
  streamOff: false,        // the stream was refused, or broke twice unheard: polls from now on
  streamMisses: 0          // streams in a row that ended or broke before an event
});

// schedule makes fn the one pending step, in ms, replacing any other.
export function schedule(fn, ms) {
  window.clearTimeout(state.timer);
  state.timer = window.setTimeout(fn, Math.max(0, ms));
}

function stopCountdown() {
  window.clearInterval(state.countdownTimer);
  state.countdownTimer = 0;
  window.clearInterval(state.retryTimer);
  state.retryTimer = 0;
}

// stopAll cancels the pending step, the countdown and the worker.
export function stopAll() {
  window.clearTimeout(state.timer);
  state.timer = 0;
  stopCountdown();
  if (state.worker) { state.worker.terminate(); state.worker = null; }
  state.awaitingSolution = false;
  stopStream();
}

// stopStream closes the status stream, if one is open.
export function stopStream() {
  if (state.stream) { state.stream.abort(); state.stream = null; }
}

// comeBackMs is the wait before asking again a room that cannot answer
// (no answer, 5xx, 429, or an edge that lost its origin): exponential from
// one second, capped at 30 s, with jitter (a half to the whole of it) so
// that a crowd that lost the room together does not come back together;
// never sooner than the answer's Retry-After (retryAfter, ms; 0: none).
export function comeBackMs(retryAfter) {
  const ms = Math.min(30000, 1000 * Math.pow(2, state.attempts));
  state.attempts++;
  return Math.max(retryAfter || 0, ms * (0.5 + Math.random() / 2));
}

// backoffMs is the wait before the next retry of the current step:
// exponential from half a second up to 8 s, jittered down to half.
export function backoffMs() {
  const ms = Math.min(8000, 500 * Math.pow(2, state.attempts));
  state.attempts++;
  return ms * (0.5 + Math.random() / 2);
}
