// Waiting in line: get a ticket, wait on the status stream (or, when it is
// refused or silent, poll the status at the server's pace: pollAfterMs,
// Retry-After), and solve the proof-of-work challenge in a
// Web Worker (pow-worker.js) when the sale asks for one. When admitted, the
// admission token is kept and reserve() (purchase.js) takes over.
//
// line.js and purchase.js import each other (admitted: reserve; the
// admission lost: back to the line). That is safe: both only declare
// functions, and none is called while the modules are being loaded.

import { store } from "./storage.js";
import { sale, state, schedule, stopAll, comeBackMs } from "./state.js";
import { api, streamStatus, retryAfterMs, retryAfterOnly, roomDown, fetchPolicy } from "./api.js";
import { app, $, setState, showError, showWaiting, showPaused, showPolicy, showBroadcast, showUnreachable, showSale } from "./ui.js";
import { rejectJWT } from "./account.js";
import { reserve } from "./purchase.js";
import { variantsOf } from "./variants.js";
import { t } from "./i18n.js";

// loadPolicy shows the sale (its product, its opening time) and how the
// line works, from the sale's policy.
export function loadPolicy() {
  fetchPolicy().then(function (r) {
    if (r.status !== 200 || !r.body) return;
    showSale(r.body);
    showPolicy(r.body.description || r.body.policy);
  });
}

// comeBackShortly: the room cannot answer (roomDown(r), or an edge that lost
// its origin): say so, and run retry after a backoff (never sooner than
// Retry-After, nor than floorMs). The ticket is kept, and nothing else is
// tried meanwhile: above all, never the purchase path, which takes only an
// admission token the room gave.
export function comeBackShortly(r, retry, floorMs) {
  const ms = Math.max(floorMs || 0, comeBackMs(r ? retryAfterOnly(r) : 0));
  showUnreachable(ms);
  schedule(retry, ms);
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
      state.lastPollAt = Date.now();
      if (r.body.stale === true) return comeBackShortly(null, poll, state.pollAfterMs);
      showWaiting(r.body);
      if (r.body.challenge) ensureSolving(r.body.challenge);
      schedule(poll, state.pollAfterMs);
      return;
    }
    if (r.status === 401) return rejectJWT();
    if (roomDown(r)) return comeBackShortly(r, getTicket);
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

// poll asks where the ticket stands: on the status stream while the
// server gives one (each answer as soon as it changes: a sell-out is heard
// at once), by one status request at the server's pace otherwise.
function poll() {
  if (!state.ticket) return getTicket();
  if (!state.streamOff && typeof window.ReadableStream === "function" && typeof window.AbortController === "function") return listen();
  pollOnce();
}

// solutionToSend is the proof of work to send with the next status request
// or stream, if any.
function solutionToSend() {
  const solution = state.solution, challenge = state.challenge;
  return (solution && challenge && solution.nonce === challenge.nonce) || (solution && !challenge) ? solution : null;
}

function statusQuery() {
  const solution = solutionToSend();
  return "?token=" + encodeURIComponent(state.ticket) + (solution ? "&solution=" + encodeURIComponent(solution.value) : "");
}

// A stream that says nothing, not even its heartbeat (every 10 s), for this
// long is taken as broken.
const STREAM_SILENCE_MS = 25000;

// listen waits on the status stream. An answer the page must act on
// (admitted, a challenge, sold out for good, a stale edge) closes it and is
// handled as a poll's would be; the others are shown as they come. When it
// ends or breaks, one status request follows (it says what the page must
// do meanwhile, and schedules the next poll: a new stream); a stream
// refused, or two in a row that end unheard, leave the page on polls.
function listen() {
  const sentSolution = !!solutionToSend();
  const ctrl = new AbortController();
  state.stream = ctrl;
  state.lastPollAt = Date.now();
  let heard = false, silence = 0;
  const alive = function () {
    window.clearTimeout(silence);
    silence = window.setTimeout(function () { ctrl.abort(); }, STREAM_SILENCE_MS);
  };
  alive();
  streamStatus(sale.base + "/status/stream" + statusQuery(), ctrl.signal, alive, function (r) {
    if (state.stream !== ctrl) return false;
    heard = true;
    state.streamMisses = 0;
    state.lastPollAt = Date.now();
    const b = r.body;
    const goesOn = (b.state === "waiting" && b.stale !== true) || (b.state === "sold_out" && b.queueIsFull === false);
    if (!goesOn) state.stream = null; // closed: what follows is a poll's business
    onStatus(r, sentSolution, goesOn);
    return goesOn;
  }).then(function (end) {
    window.clearTimeout(silence);
    if (state.stream !== ctrl) return; // closed by an answer, or stopped (stopAll)
    state.stream = null;
    // Told to reconnect (the server is stopping, or the stream's lifetime
    // is up): a new stream, no sooner than the server said, and backing
    // off, jittered, when it is told again and again (comeBackMs).
    if (end.how === "reconnect") return schedule(poll, end.retryAfterMs > 0 ? comeBackMs(end.retryAfterMs) : 0);
    if (end.how === "refused" || (!heard && ++state.streamMisses >= 2)) state.streamOff = true;
    // A refusal's Retry-After holds for the poll that replaces the stream.
    schedule(pollOnce, end.retryAfterMs);
  });
}

// pollOnce asks GET …/status once; its answer schedules the next poll.
function pollOnce() {
  if (!state.ticket) return getTicket();
  const sentSolution = !!solutionToSend();
  state.lastPollAt = Date.now();
  api("GET", sale.base + "/status" + statusQuery()).then(function (r) {
    if (r.status === 200 && r.body) return onStatus(r, sentSolution, false);
    if (r.status === 401) return rejectJWT();
    if (roomDown(r)) return comeBackShortly(r, poll, state.pollAfterMs);
    if (renewTicket(r)) return;
    handleError(r, poll);
  });
}

// onStatus acts on a status answer (200), from a poll or the stream
// (streaming: the stream goes on, and brings the next answer itself).
function onStatus(r, sentSolution, streaming) {
  state.ticketResets = 0;
  const b = r.body;
  if (b.state !== "waiting" || b.stale !== true) state.attempts = 0;
  showBroadcast(b.message);
  switch (b.state) {
    case "waiting":
      if (typeof b.pollAfterMs === "number" && b.pollAfterMs > 0) state.pollAfterMs = b.pollAfterMs;
      // An edge that cannot reach the origin says so (stale): it keeps
      // the place but lets nobody in on what it last knew.
      if (b.stale === true) return comeBackShortly(null, poll, state.pollAfterMs);
      if (b.paused || b.held) showPaused(b.position, b.held);
      else showWaiting(b);
      if (!streaming) schedule(poll, state.pollAfterMs);
      return;
    case "challenge_required": {
      if (app.dataset.state === "loading") showWaiting({});
      const ch = b.challenge || {};
      if (sentSolution && state.solution && state.solution.nonce === ch.nonce) {
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
      // A sale with variants: the choice is the answer's list, each with
      // its availability (purchase.js asks which one before reserving).
      store.setJSON(state.keys.admission, {
        token: b.admissionToken,
        expiresAt: Date.now() + (typeof b.expiresIn === "number" ? b.expiresIn : 120) * 1000,
        variants: variantsOf(b)
      });
      if (state.worker) { state.worker.terminate(); state.worker = null; }
      return reserve();
    case "sold_out":
      if (b.queueIsFull === false) {
        // Sold out for now: pending holds may give units back.
        if (typeof b.pollAfterMs === "number" && b.pollAfterMs > 0) state.pollAfterMs = b.pollAfterMs;
        setState("sold_out_for_now", t("soldOutForNow.status"));
        if (!streaming) schedule(poll, state.pollAfterMs);
        return;
      }
      return showSoldOut();
    default:
      if (!streaming) schedule(poll, state.pollAfterMs);
  }
}

function nextPollIn() {
  return state.lastPollAt + state.pollAfterMs - Date.now();
}

export function showSoldOut() {
  stopAll();
  store.del(state.keys.admission);
  setState("sold_out", t("soldOut.status"));
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
      return showError(t("error.notFound"));
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
      $("challenge-progress").textContent = t("challenge.tries", { n: d.tries });
    } else if (d.type === "solved") {
      state.solution = { nonce: d.nonce, value: d.solution };
      store.setJSON(state.keys.pow, { nonce: d.nonce, solution: d.solution });
      $("challenge-progress").textContent = t("challenge.done");
      $("challenge").hidden = true;
      if (state.awaitingSolution) {
        state.awaitingSolution = false;
        schedule(poll, nextPollIn());
      }
    }
  });
}

// newWorker starts the worker script at url. A page may start a worker only
// from its own origin: on a shop's page (embed.js) the script is Flashline's,
// so the worker is a script of the page's own (a blob) that imports it.
function newWorker(url) {
  const abs = new URL(url, window.location.href);
  if (abs.origin === window.location.origin) return new Worker(abs.href);
  const boot = new Blob(["importScripts(" + JSON.stringify(abs.href) + ");"], { type: "text/javascript" });
  return new Worker(URL.createObjectURL(boot));
}

// solveInWorker solves a proof of work in the page's worker (one at a time:
// a new one stops the last), handing each message to onMessage; the worker
// stops once solved, and its errors are shown.
export function solveInWorker(ch, onMessage) {
  if (state.worker) state.worker.terminate();
  let worker;
  try {
    worker = state.worker = newWorker(app.dataset.worker);
  } catch (e) {
    return showError(t("error.noWorkers"));
  }
  worker.onmessage = function (ev) {
    const d = ev.data || {};
    if (d.type === "solved" && d.nonce === ch.nonce) {
      worker.terminate();
      if (state.worker === worker) state.worker = null;
    } else if (d.type === "error") {
      return showError(t("error.check", { message: d.message }));
    }
    onMessage(d);
  };
  worker.onerror = function (ev) {
    showError(t("error.check", { message: ev.message || "worker error" }));
  };
  worker.postMessage({ nonce: ch.nonce, bits: ch.bits });
}
