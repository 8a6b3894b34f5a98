// A lottery sale ("admission": "lottery"): register during the window, wait
// for the draw, and, drawn, buy with the admission token the registration
// gives (reserve(), purchase.js, takes over as after a waiting room). The
// page asks the policy once: a sale whose policy is not "lottery" goes to
// the waiting room's line (fallback).
//
// A lottery with variants (the policy's variants): the form asks which one
// the shopper wants, or any, and the registration names it; a winner is
// admitted for the variant won (wonVariant), which reserve() then reserves
// without asking: the admission buys no other.

import { store } from "./storage.js";
import { sale, state, schedule, backoffMs } from "./state.js";
import { api, retryAfterMs, roomDown, fetchPolicy } from "./api.js";
import { app, $, setState, showError, showPolicy, showSale } from "./ui.js";
import { rejectJWT } from "./account.js";
import { reserve } from "./purchase.js";
import { solveInWorker, comeBackShortly } from "./line.js";
import { t, dateTime } from "./i18n.js";

let drawAt = 0;       // the draw's time (ms), from the policy
let transcript = "";  // the draw's transcript (URL), from the policy
let challenge = null; // {nonce, bits} asked to register, when the sale asks one
let solution = "";    // its solution, once the worker found it
let registering = false;
let variants = [];     // a lottery with variants': [{sku, title}], from the policy

// lotteryOrLine starts the lottery's flow for a lottery sale, and calls
// fallback (the waiting room's line) for any other.
export function lotteryOrLine(fallback) {
  fetchPolicy().then(function (r) {
    if (roomDown(r)) return comeBackShortly(r, function () { lotteryOrLine(fallback); });
    if (r.status === 200 && r.body) {
      showSale(r.body);
      if (r.body.policy !== "lottery") showPolicy(r.body.description || r.body.policy);
    }
    if (r.status !== 200 || !r.body || r.body.policy !== "lottery") return fallback();
    drawAt = Date.parse(r.body.drawAt) || 0;
    if (typeof r.body.transcript === "string" && r.body.transcript.charAt(0) === "/") transcript = sale.api + r.body.transcript;
    showPolicy(r.body.description);
    showVariants(r.body.variants);
    app.dataset.admission = "lottery";
    $("lottery-draw-at").textContent = drawTime();
    pollRegistration();
  });
}

// drawTime is the draw's time in the shopper's language and time zone.
function drawTime() {
  return dateTime(drawAt, { dateStyle: "full", timeStyle: "short" });
}

function show(title, text, formShown) {
  $("lottery-title").textContent = title;
  $("lottery-text").textContent = text;
  $("lottery-form").hidden = !formShown;
  setState("lottery", title + ". " + text);
}

// pollRegistration asks where the customer's registration stands, and acts
// on it; it asks again while the answer can still change.
function pollRegistration() {
  api("GET", sale.base + "/registration").then(function (r) {
    if (r.status === 401) return rejectJWT();
    if (roomDown(r)) return comeBackShortly(r, pollRegistration);
    if (r.status !== 200 || !r.body) return showError(r.message);
    state.attempts = 0;
    const b = r.body;
    showDrawRank(b.drawRank);
    switch (b.state) {
      case "unregistered":
        if (!b.registrationOpen) {
          show(t("lottery.closed"), t(Date.now() < drawAt ? "lottery.notOpen" : "lottery.drawn"), false);
          return schedule(pollRegistration, Date.now() < drawAt ? 10000 : 60000);
        }
        if (b.challenge && (!challenge || challenge.nonce !== b.challenge.nonce)) solve(b.challenge);
        if (!registering) show(t("lottery.registerTitle"), t("lottery.registerText"), true);
        return;
      case "registered":
        show(t("lottery.registered"), t("lottery.registeredText", { at: drawTime() }), false);
        return schedule(pollRegistration, Math.max(2000, Math.min(30000, drawAt - Date.now() + 1500)));
      case "won":
        if (b.admissionToken && b.purchaseWindowEndsAt) {
          const adm = { token: b.admissionToken, expiresAt: Date.parse(b.purchaseWindowEndsAt) };
          if (typeof b.wonVariant === "string" && b.wonVariant !== "") {
            // The admission buys the variant won, and only it.
            adm.variant = b.wonVariant;
            adm.variants = [{ sku: b.wonVariant, title: variantTitle(b.wonVariant), availability: "available" }];
          }
          store.setJSON(state.keys.admission, adm);
          return reserve();
        }
        return show(t("lottery.won"), t("lottery.windowEnded"), false);
      case "waitlisted":
        show(t("lottery.waitlisted"), t("lottery.waitlistedText", { rank: b.drawRank || "—" }), false);
        return schedule(pollRegistration, 5000);
      case "lost":
        return show(t("lottery.lost"), t("lottery.lostText"), false);
      case "expired":
        return show(t("lottery.expired"), t("lottery.expiredText"), false);
    }
    showError(t("lottery.unexpected", { state: b.state }));
  });
}

// showVariants keeps a lottery's variants and puts them on the form's
// choice, after "any"; a lottery without variants keeps the choice hidden.
function showVariants(list) {
  variants = [];
  if (!Array.isArray(list)) return;
  const select = $("lottery-variant");
  const doc = select.ownerDocument;
  while (select.options.length > 1) select.remove(1);
  for (let i = 0; i < list.length; i++) {
    const v = list[i];
    if (!v || typeof v.sku !== "string" || v.sku === "") continue;
    const title = typeof v.title === "string" && v.title !== "" ? v.title : v.sku;
    variants.push({ sku: v.sku, title: title });
    const option = doc.createElement("option");
    option.value = v.sku;
    option.textContent = title;
    option.dir = "auto";
    select.appendChild(option);
  }
  $("lottery-variant-wrap").hidden = variants.length === 0;
}

// variantTitle is the title of variant sku, else the SKU.
function variantTitle(sku) {
  for (let i = 0; i < variants.length; i++) if (variants[i].sku === sku) return variants[i].title;
  return sku;
}

// showDrawRank shows the shopper's own rank once drawn (rank > 0), and the
// link to the draw's transcript; it stays shown whatever the page does next
// (a winner goes on to buy).
function showDrawRank(rank) {
  if (typeof rank !== "number" || rank < 1) return;
  $("draw-rank").textContent = t("lottery.yourRank", { rank: rank });
  const link = $("draw-transcript");
  if (transcript) {
    link.href = transcript;
    link.textContent = t("lottery.transcriptLink");
    link.hidden = false;
  }
  $("draw-result").hidden = false;
  $("policy-box").hidden = false;
}

// solve finds the registration's proof of work in the page's worker.
function solve(ch) {
  challenge = ch;
  solution = "";
  solveInWorker(ch, function (d) {
    if (d.type === "solved" && challenge && d.nonce === challenge.nonce) solution = d.solution;
  });
}

// register sends the registration (idempotent: a repeat answers the same).
// The payment instrument is not asked: the one that counts is named by the
// store (the customer token) or by the payment provider when the winner pays.
function register() {
  if (challenge && !solution) {
    $("lottery-text").textContent = t("lottery.checking");
    return schedule(register, 300);
  }
  registering = true;
  $("lottery-register").disabled = true;
  const body = {};
  if (solution) body.solution = solution;
  if (variants.length) body.variant = $("lottery-variant").value || "any";
  api("POST", sale.base + "/registrations", { "Content-Type": "application/json" }, JSON.stringify(body)).then(function (r) {
    registering = false;
    $("lottery-register").disabled = false;
    if (r.status === 401) return rejectJWT();
    if (r.network || r.status === 503 || r.status === 429) return schedule(register, retryAfterMs(r, backoffMs()));
    if (r.status === 201) return pollRegistration();
    switch (r.code) {
      case "registration_closed":
        return pollRegistration();
      case "instrument_already_registered":
      case "invalid_request":
      case "account_too_new":
        $("lottery-text").textContent = r.message;
        return;
      case "challenge_failed":
        challenge = null;
        return pollRegistration();
    }
    showError(r.message);
  });
}

$("lottery-form").addEventListener("submit", function (ev) {
  ev.preventDefault();
  window.clearTimeout(state.timer); // the pending poll; the worker keeps solving
  register();
});
