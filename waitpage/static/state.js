// The sale the page is for, and everything the page changes as it runs, in
// one object; plus the one pending step of the flow (schedule) and stopping
// everything that runs in the background (stopAll).

import { jwtKey } from "./storage.js";

const match = window.location.pathname.match(/^\/sales\/([^/]+)\/wait\/?$/);
const saleId = match ? decodeURIComponent(match[1]) : "";

// sale is fixed for the page's life, read from its address /sales/{id}/wait.
export const sale = Object.freeze({
  known: !!match,        // false: the address is not a sale's waiting room
  id: saleId,
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
  linkToken: null          // the link's token while the customer chooses an account
});

// schedule makes fn the one pending step, in ms, replacing any other.
export function schedule(fn, ms) {
  window.clearTimeout(state.timer);
  state.timer = window.setTimeout(fn, Math.max(0, ms));
}

function stopCountdown() {
  window.clearInterval(state.countdownTimer);
  state.countdownTimer = 0;
}

// stopAll cancels the pending step, the countdown and the worker.
export function stopAll() {
  window.clearTimeout(state.timer);
  state.timer = 0;
  stopCountdown();
  if (state.worker) { state.worker.terminate(); state.worker = null; }
  state.awaitingSolution = false;
}

// backoffMs is the wait before the next retry of the current step:
// exponential from half a second up to 8 s, jittered down to half.
export function backoffMs() {
  const ms = Math.min(8000, 500 * Math.pow(2, state.attempts));
  state.attempts++;
  return ms * (0.5 + Math.random() / 2);
}
