// Waiting in line: get a ticket, poll the status at the server's pace
// (pollAfterMs, Retry-After), and solve the proof-of-work challenge in a
// Web Worker (pow-worker.js) when the sale asks for one. When admitted, the
// admission token is kept and reserve() (purchase.js) takes over.
//
// line.js and purchase.js import each other (admitted: reserve; the
// admission lost: back to the line). That is safe: both only declare
// functions, and none is called while the modules are being loaded.

import { store } from "./storage.js";
import { sale, state, schedule, stopAll, backoffMs } from "./state.js";
import { api, retryAfterMs } from "./api.js";
import { app, $, setState, showError, showWaiting, showPaused, showPolicy, showBroadcast } from "./ui.js";
import { rejectJWT } from "./account.js";
import { reserve } from "./purchase.js";

export function loadPolicy() {
  api("GET", sale.base + "/policy").then(function (r) {
    if (r.status === 200 && r.body) showPolicy(r.body.description || r.body.policy);
  });
}

// getTicket asks for a ticket, or with the one kept, for the place it holds.
export function getTicket() {
  const url = sale.base + "/ticket" + (state.ticket ? "?token=" + encodeURIComponent(state.ticket) : "");
  const sentTicket = !!state.ticket;
  api("GET", url).then(function (r) {
    if (r.status === 200 && r.body && r.body.token) {
      state.attempts = 0;
      state.ticket = r.body.token;
      store.set(state.keys.ticket, state.ticket);
      if (typeof r.body.pollAfterMs === "number" && r.body.pollAfterMs > 0) state.pollAfterMs = r.body.pollAfterMs;
      if (!state.policyShown && typeof r.body.policy === "string") showPolicy(r.body.policy);
      showWaiting(r.body);
      if (r.body.challenge) ensureSolving(r.body.challenge);
      state.lastPollAt = Date.now();
      schedule(poll, state.pollAfterMs);
      return;
    }
    if (r.network) return schedule(getTicket, backoffMs());
    if (r.status === 401) return rejectJWT();
    if (r.status === 429 || r.status === 503) {
      if (r.code === "sale_paused_fail_closed") showPaused();
      return schedule(getTicket, retryAfterMs(r, backoffMs()));
    }
    if (sentTicket && renewTicket(r)) return;
    handleError(r, getTicket);
  });
}

export function dropTicket() {
  state.ticket = null;
  store.del(state.keys.ticket);
}

// renewTicket handles a 4xx that means the server will not take our ticket
// (another sale or customer, tampered, expired): it drops the ticket and asks
// for a new one, a few times at most. False when r is some other answer.
function renewTicket(r) {
  if (r.status < 400 || r.status >= 500 || r.code === "not_found" || r.code === "sold_out" ||
      r.code === "sale_not_open" || state.ticketResets >= 3) return false;
  state.ticketResets++;
  dropTicket();
  getTicket();
  return true;
}

function poll() {
  if (!state.ticket) return getTicket();
  const solution = state.solution, challenge = state.challenge;
  let url = sale.base + "/status?token=" + encodeURIComponent(state.ticket);
  const sentSolution = !!(solution && challenge && solution.nonce === challenge.nonce) ||
    !!(solution && !challenge);
  if (sentSolution) url += "&solution=" + encodeURIComponent(solution.value);
  state.lastPollAt = Date.now();
  api("GET", url).then(function (r) {
    if (r.status === 200 && r.body) {
      state.attempts = 0;
      state.ticketResets = 0;
      const b = r.body;
      showBroadcast(b.message);
      switch (b.state) {
        case "waiting":
          if (typeof b.pollAfterMs === "number" && b.pollAfterMs > 0) state.pollAfterMs = b.pollAfterMs;
          if (b.paused || b.held) showPaused(b.position, b.held);
          else showWaiting(b);
          return schedule(poll, state.pollAfterMs);
        case "challenge_required": {
          if (app.dataset.state === "loading") showWaiting({});
          const ch = b.challenge || {};
          if (sentSolution && state.solution.nonce === ch.nonce) {
            // The server did not take our answer for this very challenge:
            // solve nothing new, just ask again at the usual pace.
            return schedule(poll, state.pollAfterMs);
          }
          ensureSolving(ch);
          if (state.solution && state.solution.nonce === ch.nonce) return schedule(poll, nextPollIn());
          state.awaitingSolution = true; // the worker's answer schedules the poll
          return;
        }
        case "admitted":
          store.setJSON(state.keys.admission, {
            token: b.admissionToken,
            expiresAt: Date.now() + (typeof b.expiresIn === "number" ? b.expiresIn : 120) * 1000
          });
          if (state.worker) { state.worker.terminate(); state.worker = null; }
          return reserve();
        case "sold_out":
          if (b.queueIsFull === false) {
            // Sold out for now: pending holds may give units back.
            if (typeof b.pollAfterMs === "number" && b.pollAfterMs > 0) state.pollAfterMs = b.pollAfterMs;
            setState("sold_out_for_now", "Sold out for now: units may come back.");
            return schedule(poll, state.pollAfterMs);
          }
          return showSoldOut();
        default:
          return schedule(poll, state.pollAfterMs);
      }
    }
    if (r.network) return schedule(poll, Math.max(state.pollAfterMs, backoffMs()));
    if (r.status === 401) return rejectJWT();
    if (r.status === 429 || r.status === 503) {
      if (r.code === "sale_paused_fail_closed") showPaused();
      return schedule(poll, retryAfterMs(r, Math.max(state.pollAfterMs, backoffMs())));
    }
    if (renewTicket(r)) return;
    handleError(r, poll);
  });
}

function nextPollIn() {
  return state.lastPollAt + state.pollAfterMs - Date.now();
}

export function showSoldOut() {
  stopAll();
  store.del(state.keys.admission);
  setState("sold_out", "Sold out.");
}

// handleError deals with the answers every step shares; retry is the step
// to run again when the answer says "later".
function handleError(r, retry) {
  switch (r.code) {
    case "sold_out":
      return showSoldOut();
    case "sale_not_open":
      showPaused();
      return schedule(retry, retryAfterMs(r, 10000));
    case "not_found":
      return showError("This sale does not exist.");
    default:
      return showError(r.message);
  }
}

// ---- proof of work ----

// ensureSolving starts the worker on challenge ch unless it is already
// being solved or solved.
function ensureSolving(ch) {
  if (!ch || typeof ch.nonce !== "string" || typeof ch.bits !== "number") return;
  if (state.challenge && state.challenge.nonce === ch.nonce &&
      (state.worker || (state.solution && state.solution.nonce === ch.nonce))) return;
  state.challenge = { nonce: ch.nonce, bits: ch.bits };
  if (state.solution && state.solution.nonce === ch.nonce) return;
  state.solution = null;
  $("challenge").hidden = false;
  $("challenge-progress").textContent = "";
  solveInWorker(ch, function (d) {
    if (!state.challenge || d.nonce !== state.challenge.nonce) return;
    if (d.type === "progress") {
      $("challenge-progress").textContent = d.tries.toLocaleString() + " tries";
    } else if (d.type === "solved") {
      state.solution = { nonce: d.nonce, value: d.solution };
      store.setJSON(state.keys.pow, { nonce: d.nonce, solution: d.solution });
      $("challenge-progress").textContent = "done";
      $("challenge").hidden = true;
      if (state.awaitingSolution) {
        state.awaitingSolution = false;
        schedule(poll, nextPollIn());
      }
    }
  });
}

// solveInWorker solves a proof of work in the page's worker (one at a time:
// a new one stops the last), handing each message to onMessage; the worker
// stops once solved, and its errors are shown.
export function solveInWorker(ch, onMessage) {
  if (state.worker) state.worker.terminate();
  let worker;
  try {
    worker = state.worker = new Worker(app.dataset.worker);
  } catch (e) {
    return showError("This browser cannot run the check the sale needs (Web Workers are off).");
  }
  worker.onmessage = function (ev) {
    const d = ev.data || {};
    if (d.type === "solved" && d.nonce === ch.nonce) {
      worker.terminate();
      if (state.worker === worker) state.worker = null;
    } else if (d.type === "error") {
      return showError("The browser check failed: " + d.message);
    }
    onMessage(d);
  };
  worker.onerror = function (ev) {
    showError("The browser check failed: " + (ev.message || "worker error"));
  };
  worker.postMessage({ nonce: ch.nonce, bits: ch.bits });
}
